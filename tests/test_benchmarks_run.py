"""The benchmark scripts still run (tiny sizes). Their timings are never asserted here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.taskfactory import requires_cgroups

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def test_stats_benchmark_runs() -> None:
    res = subprocess.run(
        # one small store (480 trials) instead of the default two: the 10,080-trial one adds a minute of CPU here
        [sys.executable, str(BENCH / "bench_stats.py"), "--tasks", "12", "--attempts", "4", "--repeats", "1"]
        + ["--small-runs", "10x8"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "store -> Markdown" in res.stdout and "store -> `headroom view` run page" in res.stdout
    assert "small run: 480 trials" in res.stdout and "runs calibrate cold" in res.stdout


def test_calibration_benchmark_runs() -> None:
    res = subprocess.run(
        [sys.executable, str(BENCH / "bench_calibration.py"), "--seeds", "2", "--small-seeds", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    for scenario in ("null", "no-oom", "tb-89x5", "tb-89x20", "demo-like"):
        assert f"\n{scenario} " in res.stdout
    for scenario in ("spec-low", "concentrated", "changer-3x", "heavy"):  # each at both designs
        assert res.stdout.count(f"\n{scenario} ") == 2, scenario
    assert "trend test size, infra permutation" in res.stdout and "headline new-tasks" in res.stdout
    assert "permutation, unequal cells" in res.stdout and "infra test size, infra stratified exact" in res.stdout


@pytest.mark.cgroup
@requires_cgroups
def test_overhead_benchmark_runs() -> None:
    res = subprocess.run(
        [sys.executable, str(BENCH / "bench_overhead.py"), "--trials", "3", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("cgroup-v") == 2  # one row per concurrency level
    assert "sandbox +ms" in res.stdout and res.stdout.count("isolation namespaces") == 2
    assert res.stdout.count("trial cgroup CPU ms") == 2  # the sandbox's CPU, from the trials' own cgroups


@pytest.mark.cgroup
@requires_cgroups
def test_overhead_parts_benchmark_runs() -> None:
    res = subprocess.run(
        [sys.executable, str(BENCH / "bench_overhead_parts.py"), "--trials", "2", "--isolation", "none"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    for part in (
        "whole trial",
        "engine thread",
        "run_step (one step)",
        "wait4",
        "cgroup create",
        "keep_artifacts",
        "settle",
    ):
        assert part in res.stdout, part


@pytest.mark.slow
def test_link_bomb_benchmark_runs() -> None:
    from tests.hostile.harness import SANDBOX

    if not SANDBOX:
        pytest.skip("bubblewrap sandbox unavailable (scripts/install-sandbox.sh)")
    res = subprocess.run(
        [sys.executable, str(BENCH / "bench_link_bomb.py"), "--trials", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr  # non-zero when a case's verdict is not the corpus's
    for case in (
        "control-wrong-answer",
        "link-bomb-deep-missing-targets",
        "link-bomb-long-chain",
        "past-the-link-count-bound",
        "link-bomb-exponential",
    ):
        assert case in res.stdout
    assert "passed" not in res.stdout and "MISMATCH" not in res.stdout


@pytest.mark.cluster
@pytest.mark.slow
def test_k8s_benchmark_runs() -> None:
    if os.environ.get("HEADROOM_SKIP_CLUSTER") == "1":
        pytest.skip("HEADROOM_SKIP_CLUSTER=1")
    res = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_k8s.py"),
            "--trials",
            "12",
            "--in-flight",
            "6",
            "--nodes",
            "2",
            "--duration",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "requests per trial (b) poll / headroom" in res.stdout
