"""The controller image the chart runs, built from helm/Dockerfile: what the chart relies on is in its archive.

The image is built here (or taken from the cache by the digest of its inputs: tests/cluster/controller_image.py)
on the engine worker's private dockerd. tests/conftest.py puts this test first in its group and the real node's
chart test (tests/cluster/test_controller_realnode.py, which runs this image's controller under Pod Security
"restricted") last in the suite's longest group, so the build runs at the suite's start beside other work and the
chart test imports the archive it left. The checks read the archive (``docker save``'s manifest, the image's
config, its last layers), so a cached image costs no load into dockerd.
"""

from __future__ import annotations

import json
import tarfile
from typing import Any

import pytest

from tests.cluster.controller_image import IMAGE_REPO, IMAGE_TAG, _context_files, controller_image
from tests.docker.fixtures import DockerEnv

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

#: What the chart's Deployment runs the container as (helm/headroom/templates/deployment.yaml, runAsUser).
RUN_AS = "65532:65532"


def _layer_names(archive: tarfile.TarFile, layer: str) -> list[str]:
    member = archive.extractfile(layer)
    assert member is not None
    with tarfile.open(fileobj=member) as inner:
        return inner.getnames()


def test_the_controller_image_runs_headroom_as_the_chart_expects(docker_env: DockerEnv) -> None:
    image = controller_image(docker_env)
    with tarfile.open(image.archive) as archive:
        manifest = archive.extractfile("manifest.json")
        assert manifest is not None
        (entry,) = json.load(manifest)
        assert entry["RepoTags"] == [f"{IMAGE_REPO}:{IMAGE_TAG}"]
        config_file = archive.extractfile(entry["Config"])
        assert config_file is not None
        config: dict[str, Any] = json.load(config_file)["config"]
        # the bundled tasks, for an Experiment that names this image as its task source (`COPY tasks /tasks`, one
        # of the last layers: the venv's layer, read last, is the one large enough to cost a look)
        tasks: set[str] = set()
        for layer in reversed(entry["Layers"]):
            tasks = {n.split("/")[1] for n in _layer_names(archive, layer) if n.startswith("tasks/")}
            if tasks:
                break

    assert config["User"] == RUN_AS  # the chart's securityContext, and never root
    assert config["Entrypoint"] == ["headroom"] and config["Cmd"] == ["cluster", "controller"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PATH"].split(":")[0] == "/opt/headroom/bin"
    # a read-only root filesystem: nothing writes bytecode, and HOME is the chart's writable /tmp
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["HOME"] == "/tmp"
    assert "8080/tcp" in config["ExposedPorts"]  # the chart's /metrics and /healthz
    # what the build context sends (its files: an empty folder under tasks/ is not in it)
    assert tasks == {arc.split("/")[1] for arc, _ in _context_files() if arc.startswith("tasks/")}
