"""One name for each figure, in every format: the report's glossary.

Every renderer (terminal, Markdown, HTML, the viewer) and the scoring rules' titles import these
names, so a figure is never "pass rate" in one place and "score (infra = fail)" in another. Plain
constants and string helpers only: this module is imported where `headroom --help` must stay fast.
"""

from __future__ import annotations


def runs_phrase(n: int, basis: str) -> str:
    """``1 source run``, ``3 source runs``, ``1 attempt index``, ``6 attempt indices``: a count of runs in its basis."""
    if basis == "attempt index":
        return f"{n} attempt {'index' if n == 1 else 'indices'}"
    if basis.endswith("runs"):
        return f"{n} {basis[:-1] if n == 1 else basis}"
    return f"{n} {basis}"


def trials_phrase(n: int) -> str:
    return f"{n} trial{'' if n == 1 else 's'}"
