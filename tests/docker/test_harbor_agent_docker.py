"""Harbor's agents on the Docker backend: Harbor's oracle and nop, unchanged, on the host in their sandbox, acting in
the try's container through ``exec`` (tests/agents/test_harbor_agent.py has the local runs and terminus-2).

terminus-2 is not run here: it drives a tmux session inside the environment, the test base image
(scripts/images/debian-base.packages: bash, coreutils, python3, procps) has no tmux, and with no registry reachable
its own fallback (apt-get install tmux) cannot fetch one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.test_harbor_agent import check_nop_fails, check_oracle_passes, requires_harbor

from .fixtures import BASE_TAG, DockerEnv

pytestmark = [pytest.mark.docker, pytest.mark.slow, requires_harbor]


def test_harbors_oracle_passes_in_a_container(docker_env: DockerEnv, tmp_path: Path) -> None:
    check_oracle_passes(tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host})
    assert docker_env.managed_containers() == []


def test_harbors_nop_fails_in_a_container(docker_env: DockerEnv, tmp_path: Path) -> None:
    check_nop_fails(tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host})
    assert docker_env.managed_containers() == []
