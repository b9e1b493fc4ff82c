"""A real local sweep exported to Harbor: a real OOM kill (a task whose agent allocates far past its memory limit,
under real cgroups) is a ``MemoryLimitExceededError`` that Harbor's own error policy files as a sandbox failure,
and the folder imports back with the run's figures. Harbor runs in its own venv (tests/export/harbor_check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.report import document
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.export.test_harbor_export import figures, harbor_load
from tests.taskfactory import HOG, requires_cgroups, write_task

pytestmark = [pytest.mark.slow, requires_cgroups]


def headroom(*args: str) -> str:
    return run_cli(*args, check=True).stdout


def test_a_real_sweep_with_an_oom_kill_exports_and_imports_back(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    write_task(root, "hog", solve=HOG.format(mb=400), memory_mb=64)
    write_task(root, "solve", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path / "h.db"
    headroom("sweep", str(root), "--multipliers", "1", "--attempts", "2", "--name", "oom", "--store", str(store),
             "--format", "none", "--no-canary")  # fmt: skip
    s = Store.open_existing(store)
    run_id = s.run(None).run_id
    original = figures(s, run_id)
    s.close()
    assert original["1x-strict"][4] == {"oom_killed": 2}, original  # the sweep really OOM-killed the hog twice

    headroom("runs", "export", f"{store}:{run_id}", "--format", "harbor", "--out", str(tmp_path / "jobs" / "oom"))
    loaded = harbor_load(tmp_path / "jobs" / "oom")
    hog = [t for t in loaded["trials"].values() if t["task_name"] == "hog"]
    assert len(hog) == 2 and all(t["exception_type"] == "MemoryLimitExceededError" for t in hog), hog
    assert all(t["failure_cause"] == "sandbox_failed" for t in hog)  # Harbor's policy: not the agent's answer
    solved = [t for t in loaded["trials"].values() if t["task_name"] == "solve"]
    assert len(solved) == 2 and all(t["rewards"] == {"reward": 1.0} and t["exception_type"] is None for t in solved)
    assert any(f.startswith("verifier/") for t in solved for f in t["files"])  # the verifier's output came along

    out = headroom("results", "import", str(tmp_path / "jobs" / "oom"), "--store", str(tmp_path / "back.db"),
                   "--format", "json")  # fmt: skip
    [done] = json.loads(out)
    back = Store.open_existing(tmp_path / "back.db")
    assert {k.removesuffix(" (oom)"): v for k, v in figures(back, done["run_id"]).items()} == original
    doc = document.build(back, done["run_id"])
    assert doc.configurations[0].counts["infra_error"] == 2 and doc.configurations[0].counts["failed"] == 0
