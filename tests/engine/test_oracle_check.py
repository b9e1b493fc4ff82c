"""The oracle check under each configuration (issue 30, item 7): real cgroup limits, the task's own solution.

``spiky``'s solution needs 100 MiB under a 64 MiB spec: the kernel OOM-kills it at 1x-strict, so its spec is too
low there; ``broken``'s solution never satisfies its verifier; ``steady`` passes everywhere.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.engine import oracle_check
from orchestrator.spec.resources import ResourceConfig
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.taskfactory import HOG, requires_cgroups, write_task

pytestmark = [pytest.mark.cgroup, requires_cgroups]
CONFIGS = "1x-strict,1x/3x,unbounded"


def headroom(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=600)


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    write_task(root, "spiky", solve=HOG.format(mb=100), memory_mb=64)
    write_task(root, "steady", solve='touch "$HEADROOM_WORKDIR/out"\n')
    write_task(root, "broken", solve="true\n")
    return root


def test_sweep_oracle_check_names_the_tasks_and_keeps_them_apart(tasks: Path, tmp_path: Path) -> None:
    store = tmp_path / "h.db"
    proc = headroom(
        "sweep", str(tasks), "--store", str(store), "--multipliers", CONFIGS, "--attempts", "1", "--oracle-check",
        "--agent", "command", "--agent-command", 'touch "$HEADROOM_WORKDIR/out"', "--no-canary", "--format", "none",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    err = " ".join(proc.stderr.split())
    assert "task spiky: its spec is too low for 1x-strict" in err and "infra_error(oom_killed)" in err
    assert "task broken: its oracle fails under every configuration" in err
    assert "steady" not in err.split("oracle check:", 1)[1].split("run ")[0]
    s = Store(store)
    runs = {r.name: r for r in s.runs()}
    assert set(runs) == {"sweep", "sweep-oracle-check"}  # the oracle's trials are a run of their own
    agent_run, oracle_run = runs["sweep"], runs["sweep-oracle-check"]
    assert s.run(oracle_run.run_id).spec["agent"]["kind"] == "oracle"
    assert len(s.planned(oracle_run.run_id)) == 9 and len(s.planned(agent_run.run_id)) == 9
    record = s.provenance(agent_run.run_id).oracle_check
    assert record is not None and record.run_id == oracle_run.run_id
    assert record.too_low == {"spiky": ["1x-strict"]}
    assert record.fails_everywhere == ["broken"]
    assert record.lowest_passing == {"spiky": "1x/3x", "steady": "1x-strict"}
    assert record.results["spiky"]["1x-strict"] == "infra_error(oom_killed)"
    assert s.provenance(oracle_run.run_id).oracle_check_for == "sweep"
    # the report of the agent's run names them
    report = headroom("report", f"{store}:{agent_run.run_id}", "--format", "markdown")
    assert "Oracle check: task spiky: its spec is too low for 1x-strict" in report.stdout


def test_tasks_validate_oracle_check(tasks: Path, tmp_path: Path) -> None:
    store = tmp_path / "v.db"
    proc = headroom(
        "tasks", "validate", str(tasks), "--oracle-check", "--multipliers", CONFIGS, "--store", str(store), "--json"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # an oracle fails somewhere
    doc = json.loads(proc.stdout)
    assert doc["oracle_check"]["too_low"] == {"spiky": ["1x-strict"]}
    assert doc["oracle_check"]["fails_everywhere"] == ["broken"]


def test_verdict_orders_configurations_by_their_limit() -> None:
    configs = [ResourceConfig.parse(c) for c in ("unbounded", "1x/2x", "1x-strict", "1x/3x")]
    got = oracle_check.verdict(
        "r",
        configs,
        {
            ("a", "1x-strict"): "infra_error(oom_killed)",
            ("a", "1x/2x"): "timeout",
            ("a", "1x/3x"): "passed",
            ("a", "unbounded"): "passed",
            ("b", "1x-strict"): "passed",
            ("b", "1x/2x"): "failed",
            ("b", "1x/3x"): "passed",
            ("b", "unbounded"): "passed",
        },
    )
    assert got.too_low == {"a": ["1x-strict", "1x/2x"], "b": ["1x/2x"]}
    assert got.lowest_passing == {"a": "1x/3x", "b": "1x-strict"}
    assert oracle_check.lines(got)[0].startswith("task a: its spec is too low for 1x-strict, 1x/2x")


def test_the_verdict_is_what_runs_calibrate_reads() -> None:
    """The oracle check writes its verdict in the shape `runs calibrate` reads ("its oracle fails below 3x")."""
    from orchestrator.commands.runs.calibrate import oracle_checks
    from orchestrator.spec.provenance import read_stored

    configs = [ResourceConfig.parse(t) for t in ("1x-strict", "1x/3x", "unbounded")]
    outcomes = {
        ("spiky", "1x-strict"): "infra_error(oom_killed)",
        ("spiky", "1x/3x"): "passed",
        ("spiky", "unbounded"): "passed",
        ("huge", "1x-strict"): "infra_error(oom_killed)",
        ("huge", "1x/3x"): "infra_error(oom_killed)",
        ("huge", "unbounded"): "passed",
        ("broken", "1x-strict"): "failed",
        ("broken", "1x/3x"): "failed",
        ("broken", "unbounded"): "failed",
        ("steady", "1x-strict"): "passed",
        ("steady", "1x/3x"): "passed",
        ("steady", "unbounded"): "passed",
    }
    record = json.loads(json.dumps(oracle_check.verdict("r1", configs, outcomes).model_dump(mode="json")))
    read = oracle_checks(read_stored({"oracle_check": record}))  # as the store keeps it, and reads it back
    assert read is not None
    assert {t: c.passes_from for t, c in read.items()} == {
        "spiky": 3.0,
        "huge": float("inf"),
        "broken": None,
        "steady": 1.0,
    }
