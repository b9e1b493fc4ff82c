"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

# One private dockerd per session, for tests/docker and the real-node tests that build images with it.
from tests.docker.fixtures import docker_env, docker_host  # noqa: F401


@pytest.fixture
def tasks_root(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    root.mkdir()
    return root
