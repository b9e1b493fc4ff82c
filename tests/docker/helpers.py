"""Small helpers shared by the Docker tests: run tries through the backend, run the CLI, read a store."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.engine.classify import classify
from orchestrator.engine.launch import build_launch
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.trial import Trial, Verdict
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import load_tasks
from tests.cli_run import headroom as run_cli
from tests.evidence_check import assert_fits_schema

from .conftest import FIXTURES, REPO


def run_tries(
    backend: DockerBackend, experiment: Experiment, wanted: list[tuple[str, str]], root: Path = FIXTURES, seed: int = 1
) -> list[tuple[TrialFacts, Verdict]]:
    """Run (task, configuration) tries concurrently through submit/observe, as the engine does."""
    tasks = {t.id: t for t in load_tasks(root)}
    handles = []
    for i, (task_id, label) in enumerate(wanted):
        trial = Trial(
            trial_id=f"{task_id}-{label}-{i}",
            task_id=task_id,
            config=ResourceConfig.parse(label),
            attempt=0,
            seed=seed,
            order=i,
        )
        handles.append(backend.submit(build_launch("test-run", trial, 0, tasks[task_id], experiment)))
    out = []
    for h in handles:
        while (facts := backend.observe(h)) is None:
            backend.wait([h], 1.0)
        assert_fits_schema(facts)  # the one evidence schema, on what a real container left
        out.append((facts, classify(facts)))
    return out


def headroom(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, timeout=timeout, cwd=cwd or REPO)


def outcomes(store_path: Path) -> dict[tuple[str, str, int], str]:
    """(task, configuration, attempt) -> final outcome (with reason) of the store's latest run."""
    store = Store.open_existing(store_path)
    try:
        run_id = store.run().run_id
        trials = {t.trial_id: t for t in store.planned(run_id)}
        out = {}
        for trial_id, rows in store.tries(run_id).items():
            final = [r for r in rows if r.final and r.status == "finished"]
            if final:
                t = trials[trial_id]
                r = final[-1]
                out[(t.task_id, t.config.label, t.attempt)] = f"{r.outcome}({r.reason})" if r.reason else str(r.outcome)
        return out
    finally:
        store.close()


def evidence(store_path: Path) -> list[dict[str, Any]]:
    store = Store.open_existing(store_path)
    try:
        run_id = store.run().run_id
        rows = [e for t in store.planned(run_id) for e in store.evidence(run_id, t.trial_id)]
        for row in rows:
            assert_fits_schema(row)
        return rows
    finally:
        store.close()


def copy_task(name: str, dest_root: Path, edit: dict[str, tuple[str, str]] | None = None) -> Path:
    """A copy of a fixture task, with (file -> (old, new)) text replacements."""
    dest = dest_root / name
    shutil.copytree(FIXTURES / name, dest)
    for rel, (old, new) in (edit or {}).items():
        p = dest / rel
        text = p.read_text()
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new))
    return dest
