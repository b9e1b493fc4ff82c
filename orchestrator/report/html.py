"""The HTML report: one self-contained file, the Markdown report rendered, laid out headline first.

The summary opens the page, the task x configuration heatmap (timeouts marked) follows it, and every
other section is folded (``<details>``) under its heading, so the first screen is the answer and the
evidence is one click away. The viewer's run page uses the same layout (:func:`layout`).
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

from orchestrator.report import heatmap, markdown, plots
from orchestrator.report.safe import visible_controls

if TYPE_CHECKING:
    from orchestrator.report.model import ReportDocument

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.6em 0 1.2em;font-size:0.9em}
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} code{background:#f5f5f5;padding:0 0.2em} img{max-width:100%}
table.heatmap td.cell{text-align:center;white-space:nowrap} table.heatmap small{color:#444}
h1{font-size:1.5em} h2{border-bottom:1px solid #ddd;padding-bottom:0.2em;margin-top:1.6em}
details.section>summary{cursor:pointer} details.section>summary h2{display:inline-block;margin:0.8em 0 0.2em}
"""

SUMMARY = "Summary"
HEATMAP_TITLE = "Tasks × configurations"
_H2 = re.compile(r"<h2>(.*?)</h2>", re.S)


def sections(body: str) -> tuple[str, list[tuple[str, str]]]:
    """Rendered HTML split at its ``<h2>`` headings: (what comes before the first, [(heading, content), ...])."""
    marks = list(_H2.finditer(body))
    if not marks:
        return body, []
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        out.append((m.group(1), body[m.end() : end]))
    return body[: marks[0].start()], out


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", html.unescape(title).lower()).strip("-") or "section"


def folded(title: str, content: str) -> str:
    """One section folded under its heading (``id`` from the heading, so a link can open it)."""
    return f'<details class="section" id="{_slug(title)}"><summary><h2>{title}</h2></summary>{content}</details>\n'


def layout(
    body: str, lead: str = "", first_folded: list[tuple[str, str]] | None = None, drop: tuple[str, ...] = ()
) -> str:
    """The summary section open, then ``lead`` (the heatmap), then ``first_folded`` and every other section of
    ``body`` folded; sections named in ``drop`` are left out (the per-task table the heatmap replaces)."""
    head, secs = sections(body)
    out = [head]
    rest = []
    for title, content in secs:
        if title == SUMMARY:
            out.append(f"<h2>{title}</h2>{content}")
        elif title not in drop:
            rest.append((title, content))
    if not any(t == SUMMARY for t, _ in secs):  # no trials yet: nothing to lead with
        return head + lead + "".join(folded(t, c) for t, c in [*(first_folded or []), *rest])
    out.append(lead)
    out += [folded(t, c) for t, c in [*(first_folded or []), *rest]]
    return "".join(out)


def heatmap_section(doc: ReportDocument, href: heatmap.Href | None = None) -> str:
    """The heatmap under its heading, with what a cell shows (timeouts marked)."""
    stats = doc.statistics
    if stats is None:
        return ""
    return (
        f'<h2 id="heatmap">{HEATMAP_TITLE}</h2><p>Each cell: passed/attempts, coloured by pass rate, with its '
        "infra errors, timeouts and peak memory against the limit"
        + ("; click a cell for its trials and every try's evidence" if href else "")
        + ".</p>"
        + heatmap.render(stats.tasks, stats.config_order, href=href)
    )


def render(doc: ReportDocument) -> str:
    # The Markdown escapes every string from the run (safe.py); raw HTML is off as well, so nothing in the
    # page is markup that the run supplied.
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    body = md.render(markdown.render(doc))
    if doc.configurations:
        figures = [
            (
                "Plots",
                f'<p><img alt="{html.escape(plots.SERIES_ALT)}" '
                f'src="{plots.rates_vs_multiplier(doc.configurations, labels_axis=doc.labels_axis)}">'
                "</p>",
            )
        ]
        body = layout(body, heatmap_section(doc), figures, drop=("Per task",))
    else:
        body = layout(body)
    title = html.escape(visible_controls(f"headroom report — {doc.run.name} ({doc.run.run_id})"))
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body>{body}</body></html>\n"
    )
