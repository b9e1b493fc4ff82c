"""benchmarks/bench_docker.py still runs (tiny sizes). Its timings are never asserted here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import REPO, DockerEnv

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cgroup]


def test_docker_benchmark_runs(docker_env: DockerEnv, docker_host: str) -> None:
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_docker.py"),
            "--image",
            docker_env.base_image,
            "--trials",
            "2",
            "--repeats",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "DOCKER_HOST": docker_host, "PYTHONPATH": str(REPO)},
    )
    assert res.returncode == 0, res.stderr
    assert "docker / local:" in res.stdout and "bare docker" in res.stdout and "docker / bare isolated:" in res.stdout
    assert docker_env.managed_containers() == []
