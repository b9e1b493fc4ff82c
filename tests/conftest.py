"""Shared fixtures, and how the suite splits over pytest-xdist workers."""

from __future__ import annotations

from pathlib import Path

import pytest

# One private dockerd per session, for tests/docker and the real-node tests that build images with it.
from tests.docker.fixtures import docker_env, docker_host  # noqa: F401

#: Session fixtures that start a shared service (a control plane and real node, a private
#: dockerd or Podman service). Each pytest process starts its own copy of what its tests use,
#: so under xdist (``--dist loadgroup``) every test that uses one goes to the same worker: the
#: suite starts each service once, as a serial run does, and the other workers take the rest.
_SERVICE_GROUPS = (
    ("kube", ("cluster", "real_node", "namespace")),
    ("engine", ("docker_env", "docker_host", "podman_env", "engine_env")),
)


def service_group(fixturenames: list[str]) -> str | None:
    """The xdist group of a test that uses a shared service (the first that applies), else None."""
    for group, fixtures in _SERVICE_GROUPS:
        if any(f in fixturenames for f in fixtures):
            return group
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks into the test's id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = service_group(list(getattr(item, "fixturenames", ())))
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def tasks_root(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    root.mkdir()
    return root
