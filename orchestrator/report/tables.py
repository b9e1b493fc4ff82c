"""Tables for a terminal of any width that never cut a number or a header.

Rich shrinks a table that is wider than the console and ellipsises its cells
("17.0% [10.9, 25.…"); on a pipe or a CI log the width is fixed, so that cut is
permanent. Instead, a table too wide for the console is fitted in steps, each
keeping every number whole:

1. headers are folded at their word breaks, down to the width of their column's cells;
2. prose columns (``wrap``: a rule's interval description, a calibration reading) are
   folded at word breaks, down to ``wrap_min`` characters;
3. only then, on a console too narrow for that (below ~120 columns for the widest
   tables), the columns are split into as many tables as the width needs, each
   repeating the key column(s) (the configuration), each marked "(1/2)".

A single column wider than the console (a very narrow terminal) is folded onto
several lines, never cut.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

# Per column: one space of padding each side plus one border; plus the table's left border.
_COLUMN_OVERHEAD = 3
_TABLE_OVERHEAD = 1
#: A prose column is never folded narrower than this.
WRAP_MIN = 20
# What a prose cell may be broken between: words, except an interval "[13.8, 60.9]" and a "pass@2 70.00%",
# which stay on one line (a number and what it belongs to are never parted).
_TOKEN = re.compile(r"\S*\[[^\]]*\]\S*|pass@\d+ \S+|\S+")


def _len(cell: str) -> int:
    """A cell's width: its longest line."""
    return max((cell_len(line) for line in cell.split("\n")), default=0)


def _cells(rows: Sequence[Sequence[str]], i: int) -> int:
    return max((_len(r[i]) for r in rows), default=0)


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _longest_token(text: str) -> int:
    return max((cell_len(t) for t in _TOKEN.findall(text)), default=0)


def reflow(cell: str, width: int) -> str:
    """A prose cell folded to ``width`` between tokens (see _TOKEN), keeping the line breaks it has."""
    out = []
    for para in cell.split("\n"):
        line = ""
        for tok in _TOKEN.findall(para):
            if line and cell_len(line) + 1 + cell_len(tok) > width:
                out.append(line)
                line = tok
            else:
                line = f"{line} {tok}" if line else tok
        out.append(line)
    return "\n".join(out)


def _natural(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([cell_len(h)] + [_len(r[i]) for r in rows]) for i, h in enumerate(headers)]


def _fits(widths: Sequence[int], width: int) -> bool:
    return _TABLE_OVERHEAD + sum(w + _COLUMN_OVERHEAD for w in widths) <= width


def fitted(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    wrap: Sequence[int] = (),
    wrap_min: int = WRAP_MIN,
) -> tuple[list[str], list[list[str]], list[int]] | None:
    """(headers, rows, column widths) that fit ``width`` without splitting the table, or None when only a split
    fits.

    Headers are folded at word breaks down to their cells' width (never below their longest word); then the
    ``wrap`` columns' cells are reflowed down to ``wrap_min`` (never below their longest token)."""
    widths = _natural(headers, rows)
    body = [list(r) for r in rows]
    if _fits(widths, width):
        return list(headers), body, widths
    folded_w = [max(_cells(rows, i), _longest_word(h), 1) for i, h in enumerate(headers)]
    folded = ["\n".join(textwrap.wrap(h, folded_w[i])) or h for i, h in enumerate(headers)]
    widths = [max(_len(h), _cells(rows, i)) for i, h in enumerate(folded)]
    if _fits(widths, width):
        return folded, body, widths
    over = _TABLE_OVERHEAD + sum(w + _COLUMN_OVERHEAD for w in widths) - width
    for i in sorted(wrap, key=lambda i: -widths[i]):  # the widest prose column gives first
        floor = max(wrap_min, _longest_word(headers[i]), *(_longest_token(r[i]) for r in rows))
        give = min(over, max(0, widths[i] - floor))
        if give <= 0:
            continue
        widths[i] -= give
        over -= give
        folded[i] = "\n".join(textwrap.wrap(headers[i], widths[i])) or headers[i]
        for r in body:
            r[i] = reflow(r[i], widths[i])
        widths[i] = max(_len(folded[i]), max(_len(r[i]) for r in body))
        if over <= 0:
            return folded, body, widths
    return None


def column_groups(widths: Sequence[int], width: int, keep: int = 1) -> list[list[int]]:
    """Split columns keep.. into groups that fit ``width`` next to the first ``keep`` columns."""
    base = _TABLE_OVERHEAD + sum(w + _COLUMN_OVERHEAD for w in widths[:keep])
    groups: list[list[int]] = []
    current: list[int] = []
    used = base
    for i in range(keep, len(widths)):
        need = widths[i] + _COLUMN_OVERHEAD
        if current and used + need > width:
            groups.append(current)
            current, used = [], base
        current.append(i)
        used += need
    if current or not groups:
        groups.append(current)
    return [list(range(keep)) + g for g in groups]


def print_table(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    keep: int = 1,
    right: Sequence[int] = (),
    wrap: Sequence[int] = (),
) -> None:
    """Print rows under headers fitted to the console (see the module docstring); ``right`` = right-aligned
    column indexes, ``wrap`` = prose columns that may fold at word breaks."""
    fit = fitted(headers, rows, console.width, wrap=wrap)
    if fit is not None:
        shown, body, widths = fit
        t = Table(title=title, title_justify="left")
        for i, h in enumerate(shown):
            t.add_column(h, justify="right" if i in right else "left", no_wrap=True, min_width=widths[i])
        for cells in body:
            t.add_row(*cells)
        console.print(t)
        return
    widths = _natural(headers, rows)
    groups = column_groups(widths, console.width, keep)
    for part, cols in enumerate(groups):
        suffix = f" ({part + 1}/{len(groups)})" if len(groups) > 1 else ""
        t = Table(title=title + suffix, title_justify="left")
        fits = _TABLE_OVERHEAD + sum(widths[i] + _COLUMN_OVERHEAD for i in cols) <= console.width
        for i in cols:
            # no_wrap keeps "17.0% [10.9, 25.3]" on one line when it fits; otherwise fold, never ellipsise.
            t.add_column(
                headers[i],
                justify="right" if i in right else "left",
                no_wrap=fits,
                overflow="fold",
                min_width=None if not fits else widths[i],
            )
        for r in rows:
            t.add_row(*(r[i] for i in cols))
        console.print(t)
