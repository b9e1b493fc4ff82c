"""``headroom runs compare``: two runs side by side, paired on what both hold."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.commands.console import out
from orchestrator.commands.options import RunName, format_option, rules_option, run_argument, store_option
from orchestrator.errors import UserError


@click.command("compare")
@run_argument(required=True, name="run_a")
@run_argument(required=True, name="run_b")
@store_option()
@format_option(("table", "json", "markdown"))
@rules_option()
@click.option(
    "--label",
    "labels",
    multiple=True,
    help="what to call A's agent, then B's (give it once or twice; default: each agent's name)",
)
def compare(run_a: RunName, run_b: RunName, store_path: Path, fmt: str, rules: str, labels: tuple[str, ...]) -> None:
    """Paired comparison of two runs on the tasks and configurations both hold (different agents or models):
    scores and their tests, cost, tokens and latency per configuration, and the cost/score front.

    RUN_A and RUN_B are run ids in --store, store files (their latest run), or FILE:RUN_ID.
    """
    from orchestrator.report import comparison, stored

    if len(labels) > 2 or any(not lab.strip() for lab in labels):
        raise UserError("give --label once or twice (A's agent, then B's), each non-empty", field="--label")
    sa, ra = run_a.open(store_path)
    sb, rb = run_b.open(store_path)
    doc = stored.comparison_document(sa, ra, sb, rb, rules=rules)
    for side, lab in zip((doc.a, doc.b), labels):
        side.label = lab
    if fmt == "json":
        click.echo(doc.to_json())
    elif fmt == "markdown":
        click.echo(comparison.markdown(doc))
    else:
        comparison.print_table(doc, out)
