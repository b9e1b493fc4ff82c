"""The Docker backend's CPU architecture is the daemon's, read from the session's private dockerd (issue 30,
item 1): a task built for another CPU (its Dockerfile's ``FROM --platform``) is refused before anything runs, in
one line that names the daemon's architecture; one built for the daemon's own passes the check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.engine import faithful
from orchestrator.spec.docker import DockerOptions
from orchestrator.tasks.loader import load_tasks
from orchestrator.tasks.needs import normalize_arch

from .helpers import copy_task, headroom

pytestmark = [pytest.mark.docker]


def _daemon_arch(docker_host: str) -> str:
    """What `docker info` says of the daemon (x86_64, aarch64, ...), in Docker's platform names."""
    out = subprocess.run(
        ["docker", "--host", docker_host, "info", "--format", "{{.Architecture}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return normalize_arch(out.stdout.strip())


def _for(root: Path, name: str, platform: str) -> None:
    task = copy_task("tests-hidden", root)
    task.rename(root / name)
    (root / name / "environment").mkdir(exist_ok=True)
    (root / name / "environment" / "Dockerfile").write_text(f"FROM --platform={platform} debian:bookworm-slim\n")


def test_a_task_for_another_cpu_than_the_daemon_s_is_refused_naming_both(docker_host: str, tmp_path: Path) -> None:
    arch = _daemon_arch(docker_host)
    other = "s390x" if arch != "s390x" else "amd64"
    root = tmp_path / "tasks"
    _for(root, "for-other", f"linux/{other}")
    _for(root, "for-this", f"linux/{arch}")
    backend = DockerBackend(DockerOptions(host=docker_host))
    try:
        profile = faithful.Profile.of(backend)
    finally:
        backend.close()
    assert profile.architectures == [arch]
    assert faithful.check_tasks(load_tasks(root, ["for-this"]), profile, env_network=True).lines == []

    res = headroom(
        "sweep", str(root), "--backend", "docker", "--attempts", "1", "--store", str(tmp_path / "r.db"), "--no-canary"
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    (line,) = [ln.strip() for ln in res.stderr.splitlines() if "CPU architecture:" in ln]
    assert line.startswith(f"CPU architecture: 1 task needs {other} CPUs and the docker backend runs on {arch}")
    assert f"for-other (environment/Dockerfile: FROM --platform=linux/{other})" in line and "for-this" not in line
    assert not (tmp_path / "r.db").exists()
