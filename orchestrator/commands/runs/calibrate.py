"""``headroom runs calibrate RUN``: per-task floor and ceiling from a sweep, as task.toml patches and a summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator.commands.options import RunName, out_dir_option, run_argument, store_option
from orchestrator.commands.outputs import check_dir, make_dir, write_file
from orchestrator.errors import UserError

if TYPE_CHECKING:  # the statistics stack loads only when the command runs: `headroom --help` stays fast
    from orchestrator.spec.provenance import Provenance
    from orchestrator.store.sqlite import Store

#: Defaults of orchestrator.stats.bands (the margin is the run-level rule's, stats.calibration.MARGIN), repeated
#: here so the CLI need not import them to show them.
ALPHA, MARGIN, MIN_PEAKS = 0.05, 0.04, 5


def oracle_checks(provenance: Provenance) -> dict[str, Any] | None:
    """The oracle check's per-task result, where one ran: the hook the calibration reads it through.

    Expected under the provenance's ``oracle_check``: ``{"tasks": {TASK_ID: {"passes_from": MULTIPLIER or
    null}}}`` -- the smallest limit multiplier at which the task's oracle passed ("unbounded" when it passed
    only without a limit; null: at none tested), as ``orchestrator.engine.oracle_check.verdict`` writes it.
    Absent: no check ran, and no task is named "its oracle fails below ..." (the trials alone can still name
    a task that "needs more than the largest limit tested").
    """
    from orchestrator.stats.bands import OracleCheck

    if provenance.oracle_check is None:
        return None
    out: dict[str, Any] = {}
    for task_id, res in provenance.oracle_check.tasks.items():
        frm = res.passes_from
        out[str(task_id)] = OracleCheck(
            passes_from=None if frm is None else float("inf") if frm == "unbounded" else float(frm)
        )
    return out


def calibration_document(
    store: Store,
    run_id: str,
    *,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    min_peaks: int = MIN_PEAKS,
    oracle: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``oracle``: per task id, its ``stats.bands.OracleCheck``; default: what the run's provenance holds."""
    from orchestrator.engine.canary_verdict import run_problems
    from orchestrator.stats.analyze import jsonable
    from orchestrator.stats.bands import CPU_STEP, MIN_CPUS, reserved_memory, task_bands

    info = store.run(run_id)
    if info.backend.startswith("import:") or info.axis != "resources":
        what = (
            f"imported ({info.backend.removeprefix('import:')})"
            if info.backend.startswith("import:")
            else "a comparison of agents or models, not of resource limits"
        )
        raise UserError(
            f"run {run_id} is {what}: it holds no limits headroom enforced or peaks it measured, so it "
            "has no bands; calibrate a `headroom sweep` run"
        )
    df = store.trial_frame(run_id)
    if df.empty:
        raise UserError(f"run {run_id} has no finished trials to calibrate from")
    # The CPU columns (CPU time, the steps' wall time, throttling) join each trial's row: the CPU floor's input.
    cpu = store.cpu_frame(run_id).drop(columns=["enforcement"])
    df = df.merge(cpu, on=["task_id", "config_label", "attempt"], how="left", validate="one_to_one")
    specs = {t.id: t.spec.environment.model_dump() for t in store.task_specs(run_id)}
    prov = store.provenance(run_id)
    if oracle is None:
        oracle = oracle_checks(prov)
    bands = task_bands(df, specs, alpha=alpha, margin=margin, min_peaks=min_peaks, oracle=oracle)
    canary = prov.canary
    if (problems := run_problems(prov)) is not None:  # at the start or on any --resume
        raise UserError(
            f"run {run_id} is not a resource sweep: the enforcement canary shows its limits did not bite "
            f"({'; '.join(problems[:2])}); bands from it would mean nothing"
        )
    return jsonable(
        {
            "schema": "headroom.bands/1",
            "run": {
                "run_id": info.run_id,
                "name": info.name,
                "backend": info.backend,
                "enforcement": info.enforcement,
                "tasks_dir": info.spec.get("tasks_dir"),
            },
            "canary_status": canary.status if canary else None,
            "n_trials": len(df),
            "configurations": sorted(set(df["config_label"]), key=lambda lab: (lab == "unbounded", lab)),
            "parameters": {
                "rule": "headroom.calibration/3 per task (stats.rule)",
                "oracle_check": oracle is not None,
                "alpha": alpha,
                "margin": margin,
                "min_peaks": min_peaks,
                "cpu_step": CPU_STEP,
                "min_cpus": MIN_CPUS,
            },
            "bands": [b.to_dict() for b in bands],
            "reserved_memory": reserved_memory(bands, 3.0),
        }
    )


def write_outputs(doc: dict[str, Any], out_dir: Path, tasks_out: Path | None) -> tuple[list[str], list[str]]:
    """summary.md, bands.json and one patch per published task; optionally patched copies of the tasks.

    Returns (notes, the published tasks whose patch was written).
    """
    from orchestrator.report.bands import summary_markdown
    from orchestrator.stats.band_types import LimitTest, TaskBand
    from orchestrator.tasks.patch import patched_toml, read_task_toml, unified_patch

    make_dir(out_dir, "--out-dir")
    write_file(out_dir / "summary.md", summary_markdown(doc), "--out-dir")
    write_file(out_dir / "bands.json", json.dumps(doc, indent=2, allow_nan=False), "--out-dir")
    tasks_dir = Path(doc["run"]["tasks_dir"] or ".")
    notes: list[str] = []
    patched: list[str] = []
    for b in doc["bands"]:
        if b["status"] != "recommended":
            continue
        band = TaskBand(**{**b, "limits": [LimitTest(**lt) for lt in b["limits"]]})
        before = read_task_toml(tasks_dir, band.task_id)
        if before is None:
            notes.append(f"{band.task_id}: task.toml not found under {tasks_dir}; no patch written")
            continue
        cpu_note = "p95 CPU use" if (band.cpu_floor_source or "").startswith("measured") else "spec cpus"
        after = patched_toml(
            before,
            band,
            f"headroom runs calibrate {doc['run']['run_id']}: floor p95 peak and "
            f"{cpu_note}, ceiling {band.ceiling_label}",
        )
        make_dir(out_dir / "patches", "--out-dir")  # only when there is a patch to put in it
        write_file(
            out_dir / "patches" / f"{band.task_id}.patch", unified_patch(band.task_id, before, after), "--out-dir"
        )
        if tasks_out is not None:
            dest = tasks_out / band.task_id
            if dest.exists():
                raise UserError("already exists; choose an empty --tasks-out", file=str(dest))
            make_dir(tasks_out, "--tasks-out")
            try:
                shutil.copytree(tasks_dir / band.task_id, dest, ignore=shutil.ignore_patterns("__pycache__"))
            except OSError as exc:
                raise UserError(
                    f"cannot copy the task ({exc.strerror or exc})", file=str(dest), field="--tasks-out"
                ) from None
            write_file(dest / "task.toml", after, "--tasks-out")
        patched.append(band.task_id)
    return notes, patched


@click.command("calibrate")
@run_argument()
@store_option()
@out_dir_option("directory for summary.md, bands.json and patches/ (default: headroom-results/bands-RUN)")
@click.option(
    "--tasks-out",
    type=click.Path(path_type=Path),
    help="also write copies of the published tasks with the bands applied (for a task-band sweep)",
)
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=ALPHA, show_default=True)
@click.option(
    "--margin",
    type=click.FloatRange(0, 1, min_open=True),
    default=MARGIN,
    show_default=True,
    help="equivalence margin of a task's pass rate against its strict limit (TOST; a ceiling above the strict "
    "limit is published only when its pass rate is shown within it, as in `headroom report`)",
)
def calibrate(
    run: RunName, store_path: Path, out_dir: Path | None, tasks_out: Path | None, alpha: float, margin: float
) -> None:
    """Per-task floor (request) and ceiling (limit) from RUN, with the evidence, as task.toml patches.

    RUN is a run id in --store, a store file (its latest run) or FILE:RUN_ID; default: the latest run in --store.
    """
    store, run_id = run.open(store_path)
    out_dir = out_dir or Path("headroom-results") / f"bands-{run_id}"
    check_dir(out_dir, "--out-dir")  # path mistakes before the statistics run
    if tasks_out is not None:
        check_dir(tasks_out, "--tasks-out")
    from orchestrator.report.stored import calibration

    doc = calibration(
        store,
        run_id,
        alpha=alpha,
        margin=margin,
        min_peaks=MIN_PEAKS,
        compute_document=lambda s, rid: calibration_document(s, rid, alpha=alpha, margin=margin, min_peaks=MIN_PEAKS),
    )
    notes, patched = write_outputs(doc, out_dir, tasks_out)
    for b in doc["bands"]:
        if b["status"] == "recommended":
            how = "measured" if (b["cpu_floor_source"] or "").startswith("measured") else "spec"
            click.echo(
                f"{b['task_id']:<20} floor {b['floor_memory_mb']:>5} MiB {b['floor_cpus']:g} cpu ({how})   "
                f"ceiling {b['ceiling_memory_mb']:>5} MiB {b['ceiling_cpus']:g} cpu ({b['ceiling_label']})"
            )
        elif b.get("spec_too_low"):
            click.echo(f"{b['task_id']:<20} spec too low: {b['spec_too_low']}")
        else:
            click.echo(f"{b['task_id']:<20} refused: {'; '.join(b['reasons'])}")
    res = doc["reserved_memory"]
    click.echo(
        f"reserved memory, one trial per published task: {res['task_band_mb']:.0f} MiB with the bands, "
        f"{res['uniform_3x_mb']:.0f} MiB at uniform 3x"
    )
    for n in notes:
        click.echo(f"note: {n}", err=True)
    # Claim only what was written: no patch and no task copy when every task was refused.
    written = f"written: {out_dir / 'summary.md'}, {out_dir / 'bands.json'}"
    if patched:
        written += f", {len(patched)} patch(es) in {out_dir / 'patches'}/"
        if tasks_out is not None:
            written += f"; patched tasks in {tasks_out}"
    else:
        written += "; no task was published, so no patch" + (f" and nothing in {tasks_out}" if tasks_out else "")
    click.echo(written, err=True)
