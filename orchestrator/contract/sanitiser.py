"""The sanitiser: one POSIX-sh script (``sanitise.sh``) every backend runs inside the try's environment.

It runs in the verifier's own view of the filesystem, as the verifier's user, with ``/`` as its
working directory, after every agent process is gone: the system resolves every path there (no
resolver of ours), so a link through a system symlink and ``..``, through ``/proc``, or into a
folder that exists only for the verifier is judged where the verifier would follow it. Its work
is bounded by a count of links it may judge (a count, not a time, so an honest tree's verdict
does not depend on how busy the machine is), by a time bound on each resolution (``readlink``
can expand links exponentially: a link that takes longer is the agent's doing), by a budget for
all of them and, as a last resort, by the step runner's timeout around it. Whatever a bound
leaves unjudged is removed and the state is ``exhausted``. What it prints is parsed by
:func:`parse`; only ``status=ok`` lets the verifier run.

A backend whose roots are host folders (the local one) may first walk them itself
(:func:`nothing_to_judge`): a tree holding nothing the script acts on gets the report the script
would print for it (:func:`nothing_judged`) without the script's processes; any other tree runs it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Literal

from orchestrator.spec.evidence import SanitiserReport

#: How many links the sanitiser may judge in all; a folder whose links would go past it has them
#: removed unjudged (``exhausted``). Judging a link costs one ``readlink`` (a chain of N links costs
#: O(N^2) hops in all): 2,000 chained links took 14 s on 2 cores (1,500: 8 s), where honest trees have tens.
MAX_LINKS = 2000
#: The bound on one resolution (``timeout -s KILL``): an honest link resolves in milliseconds, where four links of a
#: hundred components over three levels of links took over 20 s to expand. One resolution past it stops the judging.
RESOLVE_S = 2
#: The bound on all the judging: a sanitiser past it removes every link not judged yet (``exhausted``).
BUDGET_S = 120
#: The programs the sanitiser (and every command the Pod runner runs after the agent) finds, and nothing else: no
#: folder of the image's PATH the agent could write to (a work dir's ``bin``) can stand in for ``find`` or ``sh``.
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
#: The step runner's hard timeout around the whole script: a safety net far above what
#: MAX_LINKS costs even on a loaded machine, never the bound that decides a verdict.
TIMEOUT_S = 300.0
#: How many entries :func:`nothing_to_judge` looks at before it leaves the tree to the script: honest work dirs
#: hold tens to thousands; the walk stays within tens of milliseconds, and a bigger tree costs what it cost before.
QUICK_MAX_ENTRIES = 10_000
#: What a report the host walk made says (``extra.sanitiser.detail``): the script did not need to run.
QUICK_DETAIL = "nothing to judge: no link, special file or entry needing a permission fix (host walk)"
#: How much of the verdict's copy is read: its twelve short lines take some 250 bytes.
VERDICT_LIMIT = 4096
#: What a verdict read from its copy says (``extra.sanitiser.detail``).
RECOVERED_DETAIL = "the runtime lost the script's output; its verdict was read from the copy the script wrote"
Status = Literal["ok", "exhausted", "incomplete", "crashed"]
_COUNTS = (
    "links_removed",
    "links_unjudged",
    "links_unremovable",
    "links_kept",
    "roots_replaced",
    "special_removed",
    "special_left",
    "unlistable",
    "roots_scanned",
    "judging_stopped",
)


@cache
def script() -> str:
    return files(__package__).joinpath("sanitise.sh").read_text()


def argv(roots: list[str]) -> list[str]:
    """The command that sanitises ``roots`` (paths in the environment); the script's text is also in :func:`env`."""
    return ["/bin/sh", "-c", script(), "headroom-sanitise", *roots]


def env(hidden: list[str], prune: list[str], max_links: int = MAX_LINKS, verdict: str | None = None) -> dict[str, str]:
    """Its variables (the bounds: :data:`MAX_LINKS`, :data:`RESOLVE_S`, :data:`BUDGET_S`); ``verdict``: a file the
    script also writes its verdict to (:func:`recovered`)."""
    for p in (*hidden, *prune):
        if any(c.isspace() for c in p):
            raise ValueError(f"a verifier-only or pruned path may not hold white space: {p!r}")
    return {
        "HR_SAN_SCRIPT": script(),
        "HR_SAN_HIDDEN": " ".join(hidden),
        "HR_SAN_PRUNE": " ".join(prune),
        "HR_SAN_MAX_LINKS": str(int(max_links)),
        "HR_SAN_RESOLVE_S": str(RESOLVE_S),
        "HR_SAN_BUDGET_S": str(BUDGET_S),
        "PATH": PATH,
        **({"HR_SAN_VERDICT": verdict} if verdict is not None else {}),
    }


@dataclass
class Report:
    """What the sanitiser did; ``status`` is ``crashed`` if it printed no verdict (killed, no shell, no find)."""

    status: Status
    counts: dict[str, int] = field(default_factory=dict)
    detail: str = ""
    #: how one resolution was bounded: ``2s`` (``timeout``), ``none`` (the image has no ``timeout``)
    resolve_bound: str = ""
    #: it exited 0 and no verdict arrived: the script exits 0 only after its verdict was written whole (a failed
    #: write exits 3), so the output was lost on its way to headroom (a loaded Docker daemon once closed an exec's
    #: stream without it), not brought about by the agent
    lost: bool = False
    #: read from the copy the script wrote (:func:`recovered`): its output was lost, its verdict was not
    from_copy: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def evidence(self, duration_s: float) -> SanitiserReport:
        """As the try's evidence (``extra.sanitiser``): only the counts the script printed."""
        detail = RECOVERED_DETAIL if self.from_copy else self.detail
        return SanitiserReport.model_validate(
            {
                "status": self.status,
                **self.counts,
                **({"detail": detail} if detail else {}),
                **({"resolve_bound": self.resolve_bound} if self.resolve_bound else {}),
                "duration_s": duration_s,
            }
        )


def parse(stdout: str, exit_code: int | None, timed_out: bool) -> Report:
    values: dict[str, str] = {}
    for line in stdout.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            values[k.strip()] = v.strip()
    counts = {k: int(values[k]) for k in _COUNTS if values.get(k, "").isdigit()}
    status = values.get("status")
    if timed_out:
        return Report("crashed", counts, "the sanitiser ran out of time")
    if status not in ("ok", "exhausted", "incomplete") or exit_code != 0:
        return Report("crashed", counts, f"the sanitiser gave no verdict (exit {exit_code})", lost=exit_code == 0)
    bound = values.get("resolve_bound", "")
    return Report(status, counts, resolve_bound=bound if re.fullmatch(r"\d{1,4}s|none", bound) else "")  # type: ignore[arg-type]


def recovered(copy: bytes | None) -> Report | None:
    """The verdict from the copy the script wrote (``HR_SAN_VERDICT``) before the output that was lost: written
    first, so an exit 0 means it is whole unless the write failed, and then it holds no ``status`` line and the
    verdict stays lost (None). The backend names a file nothing of the agent's can reach, so the copy is the
    script's own."""
    if copy is None:
        return None
    report = parse(copy.decode(errors="replace"), 0, False)
    if report.status == "crashed":
        return None
    report.from_copy = True
    return report


def nothing_to_judge(roots: Sequence[Path], uid: int | None, max_entries: int = QUICK_MAX_ENTRIES) -> bool:
    """True only when the script would change nothing under ``roots`` and say ``ok`` with every count 0.

    ``roots`` are host paths of exactly what the verifier sees at the script's roots (a backend that
    binds them; nothing mounted inside them), walked after every agent process is gone, so the tree
    cannot change under the walk. ``uid`` is the verifier's host uid (None for root, whose folders the
    script never takes as someone else's). The script acts only on a root that is a link, a folder that
    is not its user's or lacks ``u+rwx``, a FIFO, socket or device, a file without ``u+rw``, a link, and
    a folder it cannot list: any of them here, more than ``max_entries`` entries, or any error (a name
    too long to walk, say) answers False, and the script runs as it always did. No link is resolved here:
    a tree with a link always goes to the script.
    """
    stack: list[str] = []
    for r in roots:
        try:
            st = os.lstat(r)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode) or not _own_folder(st, uid):
            return False
        stack.append(str(r))
    seen = 0
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for e in entries:
                    seen += 1
                    if seen > max_entries:
                        return False
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        if not _own_folder(st, uid):
                            return False
                        stack.append(e.path)
                    elif not stat.S_ISREG(st.st_mode) or st.st_mode & 0o600 != 0o600:
                        return False  # a link, FIFO, socket or device, or a file the script would chmod
        except OSError:
            return False
    return True


def _own_folder(st: os.stat_result, uid: int | None) -> bool:
    """What the script's first ``find`` leaves alone: ``-perm -700``, and the verifier's own unless it is root."""
    return st.st_mode & 0o700 == 0o700 and (uid is None or st.st_uid == uid)


def nothing_judged(roots: int) -> Report:
    """The report the script prints for ``roots`` folders holding nothing to judge (:func:`nothing_to_judge`)."""
    return Report("ok", {**dict.fromkeys(_COUNTS, 0), "roots_scanned": roots}, QUICK_DETAIL)
