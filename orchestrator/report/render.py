"""Pick a renderer for a report document."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.report.model import ReportDocument


def render_text(doc: ReportDocument, fmt: str) -> str:
    if fmt == "json":
        return doc.to_json()
    # Each renderer is imported when asked for: the HTML one pulls in matplotlib (its plots), which a
    # JSON, Markdown or terminal report never needs.
    if fmt == "markdown":
        from orchestrator.report import markdown

        return markdown.render(doc)
    if fmt == "html":
        from orchestrator.report import html

        return html.render(doc)
    raise ValueError(f"no text renderer for {fmt!r}")
