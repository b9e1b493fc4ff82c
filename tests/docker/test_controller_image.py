"""The controller image the chart runs, built from helm/Dockerfile, started by a real dockerd as the chart starts it.

The image is built here (or taken from the cache by the digest of its inputs: tests/cluster/controller_image.py)
on the engine worker's private dockerd. tests/conftest.py puts this test first in its group and the real node's
chart test (tests/cluster/test_controller_realnode.py) last in the suite's longest group, so the build runs at the
suite's start beside other work and the chart test imports the archive it left.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any

import docker
import pytest

from tests.cluster.controller_image import controller_image
from tests.docker.fixtures import REPO, DockerEnv

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

#: What the chart gives the controller's container (helm/headroom/templates/deployment.yaml, runAsUser).
RUN_AS = 65532


def _run(env: DockerEnv, ref: str, command: list[str], **kwargs: Any) -> str:
    out = env.client.containers.run(
        ref, command, remove=True, read_only=True, network_mode="none", tmpfs={"/tmp": ""}, **kwargs
    )
    return bytes(out).decode().strip()


def test_the_controller_image_runs_headroom_read_only_as_its_non_root_user(docker_env: DockerEnv) -> None:
    image = controller_image(docker_env)
    try:
        docker_env.client.images.get(image.ref)
    except docker.errors.ImageNotFound:  # taken from the cache: the archive is not in this dockerd yet
        with image.archive.open("rb") as f:
            for _ in docker_env.client.api.load_image(f):
                pass

    version = _run(docker_env, image.ref, ["--version"])
    assert version == f"headroom, version {importlib.metadata.version('headroom')}"
    ids = _run(docker_env, image.ref, ["-c", "import os; print(os.getuid(), os.getgid())"], entrypoint=["python"])
    assert ids == f"{RUN_AS} {RUN_AS}"
    # the controller's command parses, and its module loads with the cluster client (the `kubernetes` extra)
    assert "--resync-seconds" in _run(docker_env, image.ref, ["cluster", "controller", "--help"])
    loaded = _run(
        docker_env,
        image.ref,
        ["-c", "import orchestrator.controller.main, kubernetes, prometheus_client; print('loaded')"],
        entrypoint=["python"],
    )
    assert loaded == "loaded"
    # the bundled tasks, for an Experiment that names this image as its task source
    listed = _run(
        docker_env,
        image.ref,
        ["-c", "import os; print(' '.join(sorted(os.listdir('/tasks'))))"],
        entrypoint=["python"],
    )
    assert listed.split() == sorted(os.listdir(REPO / "tasks"))
