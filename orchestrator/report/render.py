"""Pick a renderer for a report document."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.report import html, markdown


def render_text(doc: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(doc, indent=2, allow_nan=False)
    if fmt == "markdown":
        return markdown.render(doc)
    if fmt == "html":
        return html.render(doc)
    raise ValueError(f"no text renderer for {fmt!r}")
