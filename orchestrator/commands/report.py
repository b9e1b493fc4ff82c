"""``headroom report``: one run's report, on the terminal or as a file (table, json, markdown, html)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from orchestrator.commands.console import err, out
from orchestrator.commands.options import (
    RunName,
    format_option,
    output_format,
    output_option,
    rules_option,
    run_argument,
    store_option,
)
from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.store.sqlite import Store

REPORT_FORMATS = ("table", "json", "markdown", "html")


def print_report(
    store: Store,
    run_id: str | None,
    fmt: str,
    output: Path | None = None,
    reference: str | None = None,
    rules: str | None = None,
    margin: float | None = None,
    *,
    compact: bool = False,
) -> None:
    """The report in ``fmt``; ``compact``: a table holds only the summary (what a sweep prints when it ends)."""
    from orchestrator.commands.outputs import write_file
    from orchestrator.report import stored

    if fmt == "table":
        # The stored document when the store holds one for exactly this state and these options; else computed.
        doc = stored.report_document(store, run_id, reference=reference, rules=rules, margin=margin)
        from orchestrator.report import terminal

        if output is None:
            if compact:
                terminal.print_compact(doc, out, f"headroom report {store.path}:{run_id}")
                return
            terminal.print_report(doc, out)
            return
        # The same table as on a terminal, as plain text (no colour codes) at a fixed width.
        buf = io.StringIO()
        terminal.print_report(
            doc, Console(file=buf, width=160, highlight=False, color_system=None, force_terminal=False, soft_wrap=False)
        )
        text = buf.getvalue()
    else:
        text = stored.report_text(store, run_id, fmt, reference=reference, rules=rules, margin=margin)
    if output:
        write_file(output, text, "--output")
        err.print(f"report written to {output} ({fmt})")
    else:
        click.echo(text)


@click.command()
@run_argument()
@store_option()
@format_option(
    REPORT_FORMATS,
    default=None,
    help="table, json, markdown or html (default: what --output's extension says, else table)",
)
@output_option("write to this file instead of stdout; .html, .md and .json choose the format")
@click.option(
    "--reference",
    help="reference configuration for paired tests, any label in the run "
    "(default: 1x-strict in a sweep, the first label in an import)",
)
@rules_option()
@click.option(
    "--margin",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="calibration: equivalence margin of the agent score, as a fraction (default 0.04 = 4 points)",
)
def report(
    run: RunName,
    store_path: Path,
    fmt: str | None,
    output: Path | None,
    reference: str | None,
    rules: str,
    margin: float | None,
) -> None:
    """Report a run: outcomes, rates with Wilson 95% intervals, paired and trend tests, calibration, provenance.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """
    from pydantic import ValidationError

    from orchestrator.commands.outputs import check_file
    from orchestrator.errors import LabelError
    from orchestrator.spec.resources import ResourceConfig

    fmt = output_format(fmt, output, REPORT_FORMATS)
    if fmt == "html" and output is None:
        raise UserError("--format html needs --output FILE", field="--output")
    if output is not None:
        check_file(output, "--output")
    store, run_id = run.open(store_path)
    if reference is not None:
        finished = store.finished_labels(run_id)
        if reference not in finished:  # any label in the store is taken as written; else a resource spelling
            try:
                reference = ResourceConfig.parse(reference).label
            except (LabelError, ValidationError):
                raise UserError(
                    f"unknown configuration label {reference!r} (has: {', '.join(sorted(finished)) or 'none'})",
                    field="--reference",
                ) from None
        if reference not in finished:
            raise UserError(
                f"run has no finished trials under {reference!r} (has: {', '.join(sorted(finished)) or 'none'})",
                field="--reference",
            )
    print_report(store, run_id, fmt, output, reference, rules, margin)
