"""``headroom runs bundle`` and ``headroom runs verify``: a leaderboard entry anyone can check."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import click
from rich.markup import escape

from orchestrator.commands.console import err, out
from orchestrator.commands.options import (
    RunName,
    format_option,
    out_dir_option,
    output_option,
    rules_option,
    run_argument,
    store_option,
)
from orchestrator.commands.outputs import check_dir, check_file, make_dir
from orchestrator.errors import UserError


@click.command("bundle")
@run_argument()
@store_option()
@output_option("the bundle file")
@out_dir_option("write the bundle into this directory, named by its content digest")
@rules_option("scoring rules the published report shows side by side (auto, all, or names; see headroom report)")
def bundle(run: RunName, store_path: Path, output: Path | None, out_dir: Path | None, rules: str) -> None:
    """Write RUN as one self-contained, content-addressed file: -o FILE, or --out-dir DIR to name it by its digest.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """
    if output is not None and output.is_dir():
        raise UserError(f"-o takes a file and {output} is a directory; give --out-dir DIR", field="--output")
    if output is not None and out_dir is not None:
        raise UserError("give -o FILE or --out-dir DIR, not both", field="--output")
    target = output if output is not None else out_dir
    if target is None:
        raise UserError("give -o FILE, or --out-dir DIR for a file named by its content digest", field="--output")
    if output is not None:
        check_file(output, "--output")
    else:
        check_dir(target, "--out-dir")
    from orchestrator.report import bundle as bundle_mod  # the statistics stack: only when the command runs

    store, run_id = run.open(store_path)
    with store:
        b = bundle_mod.build(store, run_id, rules=rules)
    if out_dir is not None:
        make_dir(out_dir, "--out-dir")
    path = bundle_mod.write(b, target)
    body = b["body"]
    out.print(
        f"{escape(str(path))}: run {body['run']['run_id']}, {len(body['trials'])} trials, "
        f"{len(body['tasks'])} tasks, sha256:{b['content_sha256']}"
    )
    err.print(f"check it with: headroom runs verify {path}")


@click.command("verify")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--tasks",
    "tasks_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="task directories to check against the bundle's task digests",
)
@store_option(default=None, help="a store holding the run's artifacts: check each artifact digest against its content")
@format_option(("table", "json"))
@click.pass_context
def verify(ctx: click.Context, file: Path, tasks_dir: Path | None, store_path: Path | None, fmt: str) -> None:
    """Recompute every published number of a bundle from its trials and check its digests (exit 1 on any mismatch)."""
    from orchestrator.report import bundle as bundle_mod
    from orchestrator.store.sqlite import Store

    loaded = bundle_mod.load(file)
    with contextlib.nullcontext() if store_path is None else Store.open_existing(store_path) as store:
        result = bundle_mod.verify(loaded, file_name=file.name, tasks_dir=tasks_dir, store=store)
    if fmt == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        for c in result["checks"]:
            out.print(f"[green]ok[/]       {escape(c)}")
        for p in result["problems"]:
            out.print(f"[red]mismatch[/] {escape(p)}", soft_wrap=True)
        out.print(
            "[bold green]verified[/]"
            if result["ok"]
            else f"[bold red]NOT verified[/]: {len(result['problems'])} problem(s)"
        )
    if not result["ok"]:
        ctx.exit(1)
