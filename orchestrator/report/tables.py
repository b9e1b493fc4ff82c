"""Tables for a terminal of any width that never cut a number or a header.

Rich shrinks a table that is wider than the console and ellipsises its cells
("17.0% [10.9, 25.…"); on a pipe or a CI log the width is fixed, so that cut is
permanent. Instead, the columns are split into as many tables as the width needs,
each repeating the key column(s) (the configuration), and each table is laid out
at its natural width. A single column wider than the console (a very narrow
terminal) is folded onto several lines, never cut.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

# Per column: one space of padding each side plus one border; plus the table's left border.
_COLUMN_OVERHEAD = 3
_TABLE_OVERHEAD = 1


def _natural(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(headers)]


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


def print_table(console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], *,
                keep: int = 1, right: Sequence[int] = ()) -> None:
    """Print rows under headers, split by columns to fit the console; ``right`` = right-aligned column indexes."""
    widths = _natural(headers, rows)
    groups = column_groups(widths, console.width, keep)
    for part, cols in enumerate(groups):
        suffix = f" ({part + 1}/{len(groups)})" if len(groups) > 1 else ""
        t = Table(title=title + suffix, title_justify="left")
        fits = _TABLE_OVERHEAD + sum(widths[i] + _COLUMN_OVERHEAD for i in cols) <= console.width
        for i in cols:
            # no_wrap keeps "17.0% [10.9, 25.3]" on one line when it fits; otherwise fold, never ellipsise.
            t.add_column(headers[i], justify="right" if i in right else "left", no_wrap=fits, overflow="fold",
                         min_width=None if not fits else widths[i])
        for r in rows:
            t.add_row(*(r[i] for i in cols))
        console.print(t)
