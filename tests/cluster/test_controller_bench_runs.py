"""benchmarks/bench_controller.py still runs (tiny size). Its numbers are never asserted here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .plane import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_controller_benchmark_runs() -> None:
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_controller.py"),
            "--trials",
            "60",
            "--seconds",
            "3",
            "--repeats",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "RSS peak (MB)" in res.stdout and "Trials/s" in res.stdout
