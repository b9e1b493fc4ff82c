"""Stores of imported submissions for the report tests, written through the importer itself (no CLI process)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.importers import results as importer
from orchestrator.store.sqlite import Store
from tests.importers.formats import T, write_tb_run


def import_into(store_path: Path, *paths: Path) -> str:
    """Import the sources found under ``paths`` as one run, as ``headroom results import`` does; its run id."""
    sources, stray = importer.read_sources(list(paths), threshold=1.0, overrides={})
    plan = importer.plan(sources, threshold=1.0, stray=stray)
    run, tasks, trials = importer.records(plan, name="imported")
    store = Store(store_path)
    try:
        return store.import_run(run, tasks, trials)
    finally:
        store.close()


def three_run_submission(root: Path) -> Path:
    """One agent's three Terminal-Bench runs (by hand: run accuracies 1/4, 3/4, 1/4, mean 5/12 = 41.67%;
    headroom counts 4 passes of 12 = 33.3%: run-c's trial resolved after an agent timeout is a timeout there)."""
    sub = root / "results" / "20260301_terminus_m-one"
    write_tb_run(
        sub / "run-a",
        [T("t1", True), T("t1", False), T("t2", False), T("t2", False)],
        names_with_run=False,
        per_trial_copies=False,
    )
    write_tb_run(
        sub / "run-b",
        [T("t1", True), T("t1", True), T("t2", True), T("t2", False)],
        names_with_run=False,
        per_trial_copies=False,
    )
    write_tb_run(
        sub / "run-c",
        [T("t1", False), T("t1", False), T("t2", False), T("t2", True, "agent_timeout")],
        names_with_run=False,
        per_trial_copies=False,
    )
    return root / "results"
