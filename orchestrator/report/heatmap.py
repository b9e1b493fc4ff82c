"""The task x configuration heatmap as an HTML table, for the HTML report and the viewer.

WHY a table and not an image: it stays sharp and searchable at any size, costs
milliseconds for hundreds of tasks (a rendered image of 100 tasks took seconds),
and in the viewer every cell is a link to its trials.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.report.safe import visible_controls

if TYPE_CHECKING:
    from orchestrator.spec.analysis import TaskCell, TaskRow


def colour(rate: float | None) -> str:
    """Red (0% pass) through yellow to green (100%); grey when nothing ran."""
    if rate is None:
        return "#eeeeee"
    return f"hsl({120 * rate:.0f}, 65%, 72%)"


def cell_text(c: TaskCell) -> tuple[str, str]:
    """(visible text, hover title) of one cell."""
    text = f"{c.passed}/{c.n}"
    extra = []
    if c.infra_errors:
        extra.append(f"{c.infra_errors} infra")
    if c.timeouts:
        extra.append(f"{c.timeouts} timeout" + ("s" if c.timeouts > 1 else ""))
    if c.abstained:
        extra.append(f"{c.abstained} abstained")
    ratio = c.peak_memory_to_limit_max
    if ratio is not None:
        extra.append(f"peak {ratio:.2f}x limit")
    return text, ", ".join(extra)


#: A cell's link: (task id, configuration label) -> URL.
Href = Callable[[str, str], str]


def render(tasks: list[TaskRow], labels: list[str], href: Href | None = None) -> str:
    """``href(task_id, label)`` makes each cell a link (the viewer); None for the static report."""

    def esc(text: str, quote: bool = True) -> str:  # the run's text: controls spelled out, then HTML-escaped
        return html.escape(visible_controls(text), quote=quote)

    head = "".join(f"<th>{esc(lab)}</th>" for lab in labels)
    out = ['<table class="heatmap"><thead><tr><th>task</th><th>cluster</th>', head, "</tr></thead><tbody>"]
    for t in tasks:
        out.append(f"<tr><th>{esc(t.task_id)}</th><td>{esc(t.cluster_id)}</td>")
        for lab in labels:
            c = t.configs.get(lab)
            if not c:
                out.append(f'<td style="background:{colour(None)}">—</td>')
                continue
            text, extra = cell_text(c)
            title = esc(f"{t.task_id} × {lab}: {text} passed" + (f", {extra}" if extra else ""), quote=True)
            inner = esc(text)
            if href is not None:
                inner = f'<a href="{esc(href(t.task_id, lab), quote=True)}">{inner}</a>'
            small = f" <small>{esc(extra)}</small>" if extra else ""
            out.append(
                f'<td class="cell" style="background:{colour(c.pass_rate)}" title="{title}" '
                f'data-task="{esc(t.task_id, quote=True)}" data-config="{esc(lab, quote=True)}">'
                f"{inner}{small}</td>"
            )
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)
