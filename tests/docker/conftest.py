"""The Docker tests' fixtures live in fixtures.py and are registered suite-wide by tests/conftest.py
(one private dockerd per session, shared with the real-node tests); the names stay importable here.
The Podman service and the per-engine fixtures are used only here, so they are registered here."""

from .fixtures import BASE_TAG, FIXTURES, REPO, DockerEnv, engine_env, engine_host, podman_env  # noqa: F401

__all__ = ["BASE_TAG", "FIXTURES", "REPO", "DockerEnv"]
