"""``headroom runs export RUN --format harbor --out DIR``: a run in another tool's format (docs/import.md)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from orchestrator.commands.console import err, out
from orchestrator.commands.options import RunName, format_option, out_dir_option, run_argument, store_option
from orchestrator.commands.outputs import check_dir
from orchestrator.errors import UserError
from orchestrator.report.safe import terminal_text


@click.command("export")
@run_argument()
@store_option()
@format_option(
    ("harbor",),
    default="harbor",
    help="harbor: a Harbor job folder (job and trial result.json, config, lock, agent/ and verifier/ logs)",
)
@out_dir_option("the job folder to write (new, or empty); `harbor view` reads the folder holding it", also=("--out",))
def export(run: RunName, store_path: Path, fmt: str, out_dir: Path | None) -> None:
    """Write RUN in another tool's format: --format harbor writes a Harbor job folder Harbor's own tools read.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """
    if out_dir is None:
        raise UserError("give --out DIR, the job folder to write", field="--out")
    check_dir(out_dir, "--out")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise UserError(
            "is not empty; give a new or empty directory for the job folder", file=str(out_dir), field="--out"
        )
    from orchestrator.export import harbor_job

    store, run_id = run.open(store_path)
    try:
        try:
            summary = harbor_job.export(store, run_id, out_dir)
        except OSError as exc:
            raise UserError(f"cannot write the job folder ({exc.strerror})", file=str(out_dir), field="--out") from None
    finally:
        store.close()
    out.print(
        f"{escape(str(out_dir))}: run {escape(run_id)} as a Harbor job: {summary.trials} trials of "
        f"{len(summary.configurations)} configuration(s), {summary.retries} earlier tries as retries, "
        f"{summary.artifacts} artifact files",
        soft_wrap=True,
    )
    if summary.without_result:
        err.print(
            f"[yellow]note[/]: {summary.without_result} trial(s) have no result yet (the run was stopped): left out"
        )
    missed = summary.artifacts_not_written
    if missed:  # one name a file in one place and a folder in another, say: each listed in its trial's manifest
        first = missed[0]
        err.print(
            f"[yellow]note[/]: {len(missed)} artifact(s) not written, each listed with why in its trial's "
            f"artifacts/headroom/manifest.json (e.g. {escape(terminal_text(first['name']))} in "
            f"{escape(first['trial'])}: {escape(first['why'])})",
            soft_wrap=True,
        )
    err.print(f"read it with: harbor view {escape(str(out_dir.absolute().parent))}")
