"""Session fixture ``docker_env``: a Docker daemon with the Debian base image loaded.

Registered for the whole suite by tests/conftest.py, so tests/docker and the real-node tests
of tests/cluster (which build task images with it) share one daemon per session.

* default: start a private dockerd (tests/docker/daemon.py) from Debian's docker.io,
  installed by ``scripts/docker/install.sh``; fail (not skip) with that instruction
  if it is missing.
* ``DOCKER_HOST=<address>`` with ``HEADROOM_TEST_DOCKER_HOST=1``: use that daemon instead
  (Docker Desktop, Podman's API socket, ...). Its containers are removed by the tests.
* ``HEADROOM_SKIP_DOCKER=1``: skip every test that uses the fixture.

Session fixture ``podman_env`` is the same for Podman: a private rootful ``podman system
service`` (tests/docker/podman.py) from Debian's podman, serving the Docker Engine API on
its own unix socket; ``HEADROOM_SKIP_PODMAN=1`` skips the tests that use it. Tests that
take ``engine_env`` run once per engine.

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

from orchestrator.backends.docker.backend import engine_of

from .daemon import PrivateDockerd
from .podman import PrivatePodman

REPO = Path(__file__).resolve().parents[2]
BASE_TAG = "headroom.local/tb2-base:latest"
FIXTURES = REPO / "tests" / "fixtures" / "tb2"


@dataclass
class DockerEnv:
    host: str
    client: docker.DockerClient
    base_image: str
    daemon: PrivateDockerd | PrivatePodman | None
    engine: str = "docker"

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
    yield from _serve(host, daemon)


@pytest.fixture(scope="session")
def podman_env() -> Iterator[DockerEnv]:
    if os.environ.get("HEADROOM_SKIP_PODMAN") == "1":
        pytest.skip("HEADROOM_SKIP_PODMAN=1")
    podman = shutil.which("podman")
    if podman is None:
        pytest.fail("podman is not installed: run scripts/docker/install.sh (Debian's podman)")
    daemon = PrivatePodman(podman)
    daemon.start()
    yield from _serve(daemon.host, daemon)


@pytest.fixture(params=["docker", "podman"])
def engine_env(request: pytest.FixtureRequest) -> DockerEnv:
    """The session's dockerd or Podman service: a test taking this runs once on each engine."""
    env: DockerEnv = request.getfixturevalue(f"{request.param}_env")
    return env


@pytest.fixture
def engine_host(engine_env: DockerEnv, monkeypatch: pytest.MonkeyPatch) -> str:
    """DOCKER_HOST pointing at ``engine_env``'s daemon, for the backend and CLI subprocesses."""
    monkeypatch.setenv("DOCKER_HOST", engine_env.host)
    return engine_env.host


def _serve(host: str, daemon: PrivateDockerd | PrivatePodman | None) -> Iterator[DockerEnv]:
    """The base image loaded and tagged on the daemon at ``host``; every managed container removed at the end."""
    client = docker.DockerClient(base_url=host, timeout=300)
    try:
        engine = engine_of(client.version())  # an existing DOCKER_HOST may be a Podman too
        name, archive = _base_archive()
        try:
            client.images.get(name)
        except docker.errors.ImageNotFound:
            with archive.open("rb") as f:
                for _ in client.api.load_image(f):  # the load's progress: read to its end
                    pass
        repo, _, tag = BASE_TAG.rpartition(":")
        client.images.get(name).tag(repo, tag)  # Podman takes no "repo:tag" in the repository field
        yield DockerEnv(host=host, client=client, base_image=BASE_TAG, daemon=daemon, engine=engine)
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
