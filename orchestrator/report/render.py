"""Lay the report document out as a terminal table, JSON or Markdown."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from orchestrator.errors import UserError
from orchestrator.report import document
from orchestrator.store.sqlite import Store


def pct(p: dict[str, Any] | None) -> str:
    if not p or p.get("estimate") is None:
        return "—"
    return f"{100 * p['estimate']:.1f}% [{100 * p['low']:.1f}, {100 * p['high']:.1f}]"


def _lim(block: dict[str, Any]) -> str:
    return "none" if block["limit_multiplier"] is None else f"{block['limit_multiplier']:g}x"


def config_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for b in doc["configurations"]:
        c = b["counts"]
        rows.append([
            b["label"], f"{b['request_multiplier']:g}x", _lim(b), str(b["trials"]),
            str(c["passed"]), str(c["failed"]), str(c["timeout"]), str(c["infra_error"]), str(c["harness_error"]),
            pct(b["pass_rate"]), pct(b["infra_error_rate"]),
        ])
    return rows


HEADERS = ["config", "request", "limit", "n", "passed", "failed", "timeout", "infra", "harness",
           "pass rate [95% CI]", "infra-error rate [95% CI]"]


def print_table(store: Store, run_id: str | None, console: Console) -> None:
    doc = document.build(store, run_id)
    run = doc["run"]
    table = Table(title=f"run {run['run_id']} ({run['status']}, {run['trials_finished']}/{run['trials_planned']} trials,"
                        f" enforcement {run['enforcement']})")
    for h in HEADERS:
        table.add_column(h, justify="left" if h == "config" else "right", no_wrap=True)
    for row in config_rows(doc):
        table.add_row(*row)
    console.print(table)
    console.print("Pass rate counts infra errors as failures (leaderboard practice); intervals are Wilson 95%.")


def markdown(doc: dict[str, Any]) -> str:
    run = doc["run"]
    prov = doc["provenance"]
    backend = prov.get("backend", {})
    lines = [
        f"# headroom report — run {run['run_id']}",
        "",
        "## Setup",
        f"- orchestrator {prov.get('orchestrator', {}).get('version')} @ {prov.get('orchestrator', {}).get('revision')}",
        f"- enforcement: {run['enforcement']}; kernel {backend.get('kernel')}; CPU {backend.get('cpu_model')}",
        f"- status: {run['status']}, {run['trials_finished']}/{run['trials_planned']} trials, started {run['created_at']}",
        "",
        "## Results by configuration",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in config_rows(doc)]
    return "\n".join(lines) + "\n"


def render(store: Store, run_id: str | None, fmt: str) -> str:
    doc = document.build(store, run_id)
    if fmt == "json":
        return json.dumps(doc, indent=2, allow_nan=False)
    if fmt == "markdown":
        return markdown(doc)
    if fmt == "table":
        return ""
    raise UserError(f"unknown report format {fmt!r}", field="--format")
