"""Pick a renderer for a report document."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.report import html, markdown

if TYPE_CHECKING:
    from orchestrator.report.model import ReportDocument


def render_text(doc: ReportDocument, fmt: str) -> str:
    if fmt == "json":
        return doc.to_json()
    if fmt == "markdown":
        return markdown.render(doc)
    if fmt == "html":
        return html.render(doc)
    raise ValueError(f"no text renderer for {fmt!r}")
