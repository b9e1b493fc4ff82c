"""Harbor's agents on the Docker backend: Harbor's oracle, nop and terminus-2, unchanged, on the host in their
sandbox, acting in the try's container through ``exec`` (tests/agents/test_harbor_agent.py has the local runs).

terminus-2 drives a tmux session inside the container: the test base image carries tmux
(scripts/images/debian-base.packages), since with no registry reachable its own fallback (apt-get install tmux) could
not fetch one. Its model is tests/agents/fake_model.py, a scripted server on loopback standing in for a provider.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.test_harbor_agent import (
    check_nop_fails,
    check_oracle_passes,
    check_terminus_2_solves,
    requires_harbor,
)
from tests.agents.test_harbor_installed_agent import check_failed_install_is_infra, check_install_is_its_own_phase

from .fixtures import BASE_TAG, DockerEnv

pytestmark = [pytest.mark.docker, pytest.mark.slow, requires_harbor]


def test_harbors_oracle_passes_in_a_container(docker_env: DockerEnv, tmp_path: Path) -> None:
    check_oracle_passes(tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host})
    assert docker_env.managed_containers() == []


def test_harbors_nop_fails_in_a_container(docker_env: DockerEnv, tmp_path: Path) -> None:
    check_nop_fails(tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host})
    assert docker_env.managed_containers() == []


def test_terminus_2_solves_a_task_with_a_scripted_model_in_a_container(docker_env: DockerEnv, tmp_path: Path) -> None:
    check_terminus_2_solves(tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host})
    assert docker_env.managed_containers() == []


def test_an_installed_harbor_agents_setup_is_the_agent_setup_phase_in_a_container(
    docker_env: DockerEnv, tmp_path: Path
) -> None:
    check_install_is_its_own_phase(
        tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host}
    )
    assert docker_env.managed_containers() == []


def test_a_failed_harbor_install_is_an_infra_error_in_a_container(docker_env: DockerEnv, tmp_path: Path) -> None:
    check_failed_install_is_infra(
        tmp_path, {"backend": "docker", "image": BASE_TAG}, env={"DOCKER_HOST": docker_env.host}
    )
    assert docker_env.managed_containers() == []
