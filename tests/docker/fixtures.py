"""Session fixture ``docker_env``: a Docker daemon with the Debian base image loaded.

Registered for the whole suite by tests/conftest.py, so tests/docker and the real-node tests
of tests/cluster (which build task images with it) share one daemon per session.

* default: start a private dockerd (tests/docker/daemon.py) from Debian's docker.io,
  installed by ``scripts/docker/install.sh``; fail (not skip) with that instruction
  if it is missing.
* ``DOCKER_HOST=<address>`` with ``HEADROOM_TEST_DOCKER_HOST=1``: use that daemon instead
  (Docker Desktop, Podman's API socket, ...). Its containers are removed by the tests.
* ``HEADROOM_SKIP_DOCKER=1``: skip every test that uses the fixture.

No registry is reachable from the test machines, so the base image comes from
``scripts/images/build.sh`` (Debian packages via mmdebstrap, cached by input digest)
and is loaded with the API's ``load`` (``docker load``). It is tagged
:data:`BASE_TAG`, the name the fixture tasks' Dockerfiles start ``FROM``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from .daemon import PrivateDockerd

REPO = Path(__file__).resolve().parents[2]
BASE_TAG = "headroom.local/tb2-base:latest"
FIXTURES = REPO / "tests" / "fixtures" / "tb2"


@dataclass
class DockerEnv:
    host: str
    client: docker.DockerClient
    base_image: str
    daemon: PrivateDockerd | None

    def managed_containers(self) -> list[dict]:
        return self.client.api.containers(all=True, filters={"label": "headroom.dev/managed=true"})


def _base_archive() -> tuple[str, Path]:
    script = REPO / "scripts" / "images" / "build.sh"
    res = subprocess.run([str(script), "--exports"], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"the Debian base image is not built: run scripts/docker/install.sh ({res.stderr.strip()})")
    env = dict(line.removeprefix("export ").split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    return env["HEADROOM_IMAGE_BASE"], Path(env["HEADROOM_IMAGE_BASE_ARCHIVE"])


@pytest.fixture(scope="session")
def docker_env() -> Iterator[DockerEnv]:
    if os.environ.get("HEADROOM_SKIP_DOCKER") == "1":
        pytest.skip("HEADROOM_SKIP_DOCKER=1")
    daemon: PrivateDockerd | None = None
    if os.environ.get("HEADROOM_TEST_DOCKER_HOST") == "1" and os.environ.get("DOCKER_HOST"):
        host = os.environ["DOCKER_HOST"]
    else:
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            pytest.fail("dockerd is not installed: run scripts/docker/install.sh (Debian's docker.io)")
        daemon = PrivateDockerd(dockerd)
        daemon.start()
        host = daemon.host
    client = docker.DockerClient(base_url=host, timeout=300)
    try:
        name, archive = _base_archive()
        try:
            client.images.get(name)
        except docker.errors.ImageNotFound:
            with archive.open("rb") as f:
                client.api.load_image(f)
        client.images.get(name).tag(BASE_TAG)
        yield DockerEnv(host=host, client=client, base_image=BASE_TAG, daemon=daemon)
    finally:
        try:
            for c in client.api.containers(all=True, filters={"label": "headroom.dev/managed=true"}):
                client.api.remove_container(c["Id"], force=True, v=True)
        finally:
            client.close()
            if daemon is not None:
                daemon.stop()


@pytest.fixture
def docker_host(docker_env: DockerEnv, monkeypatch: pytest.MonkeyPatch) -> str:
    """DOCKER_HOST pointing at the session daemon, for the backend and CLI subprocesses."""
    monkeypatch.setenv("DOCKER_HOST", docker_env.host)
    return docker_env.host
