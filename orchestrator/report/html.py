"""The HTML report: one self-contained file, the Markdown report rendered, with the rates plot embedded
and the task x configuration heatmap as a coloured table."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

from orchestrator.report import heatmap, markdown, plots

if TYPE_CHECKING:
    from orchestrator.report.model import ReportDocument

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.6em 0 1.2em;font-size:0.9em}
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} code{background:#f5f5f5;padding:0 0.2em} img{max-width:100%}
table.heatmap td.cell{text-align:center;white-space:nowrap} table.heatmap small{color:#444}
h1{font-size:1.5em} h2{border-bottom:1px solid #ddd;padding-bottom:0.2em;margin-top:1.6em}
"""


def render(doc: ReportDocument) -> str:
    md = MarkdownIt("commonmark").enable("table")
    body = md.render(markdown.render(doc))
    if doc.configurations:
        figures = (
            f'<h2>Plots</h2><p><img alt="pass and infra-error rates by configuration" '
            f'src="{plots.rates_vs_multiplier(doc.configurations, labels_axis=doc.labels_axis)}"></p>'
            "<p>Per-task pass rate by configuration (passed/attempts; a cell notes its infra errors, timeouts and peak memory):</p>"
            + heatmap.render(doc.statistics["tasks"], doc.statistics["config_order"])
        )
        body = body.replace("<h2>Exclusions</h2>", figures + "<h2>Exclusions</h2>", 1)
    title = html.escape(f"headroom report — {doc.run.name} ({doc.run.run_id})")
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")
