"""storage_mb is enforced on the local backend the kubelet's way: a trial that writes past it is evicted."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.backends.local.storage import usage_bytes
from orchestrator.classify import classify
from orchestrator.launch import build_launch
from orchestrator.plan import plan
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.tasks.loader import load_tasks
from tests.taskfactory import write_task

MIB = 1024 * 1024


def _run(root: Path, configs: list[str]) -> dict[str, tuple]:
    tasks = {t.id: t for t in load_tasks(root)}
    exp = Experiment(tasks_dir=str(root), configurations=configs, attempts=1)
    backend = LocalBackend()
    try:
        return {trial.config.label: (f := backend.run(build_launch("t", trial, 0, tasks[trial.task_id], exp)), classify(f))
                for trial in plan(exp, list(tasks.values()))}
    finally:
        backend.close()


@pytest.mark.parametrize("where", ["$HEADROOM_WORKDIR", "$TMPDIR", "$HOME"])
def test_filling_the_disk_ends_storage_limit_and_unbounded_passes(tasks_root: Path, where: str) -> None:
    # 40 MiB of real (non-sparse) data against a 16 MiB limit, written slowly enough to be caught mid-step,
    # then the agent keeps running: only the eviction can end it before its timeout.
    solve = (f'for i in $(seq 40); do head -c 1048576 /dev/urandom > "{where}/blob$i"; sleep 0.02; done\n'
             'touch "$HEADROOM_WORKDIR/out"; sleep 30\n')
    write_task(tasks_root, "filler", solve=solve, agent_timeout=60, extra_toml="")
    toml = tasks_root / "filler" / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 64\n", "memory_mb = 64\nstorage_mb = 16\n"))
    res = _run(tasks_root, ["1x-strict"])
    facts, verdict = res["1x-strict"]
    assert (verdict.outcome, verdict.reason) == (Outcome.INFRA_ERROR, InfraReason.STORAGE_LIMIT)
    assert "over its storage limit of 16.0 MiB" in (facts.infra_detail or "")
    assert facts.agent is not None and not facts.agent.timed_out and facts.agent.duration_s < 25
    assert facts.verifier is None  # an evicted trial is not graded


def test_a_trial_under_its_storage_limit_is_not_touched(tasks_root: Path) -> None:
    solve = 'head -c 2000000 /dev/urandom > "$HEADROOM_WORKDIR/blob"; touch "$HEADROOM_WORKDIR/out"\n'
    write_task(tasks_root, "small", solve=solve)
    toml = tasks_root / "small" / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 64\n", "memory_mb = 64\nstorage_mb = 16\n"))
    facts, verdict = _run(tasks_root, ["1x-strict"])["1x-strict"]
    assert verdict.outcome is Outcome.PASSED
    assert 2_000_000 <= facts.extra["storage_peak_bytes"] < 16 * MIB


def test_usage_counts_allocated_blocks_once_per_inode(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 1_000_000)
    (tmp_path / "b").hardlink_to(tmp_path / "a")
    (tmp_path / "link").symlink_to("/usr")  # not followed
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(1 << 30)  # 1 GiB apparent, nothing allocated
    used = usage_bytes([tmp_path])
    assert 1_000_000 <= used < 1_200_000
