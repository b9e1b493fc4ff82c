"""The Docker tests' fixtures live in fixtures.py and are registered suite-wide by tests/conftest.py
(one private dockerd per session, shared with the real-node tests); the names stay importable here."""

from .fixtures import BASE_TAG, FIXTURES, REPO, DockerEnv

__all__ = ["BASE_TAG", "FIXTURES", "REPO", "DockerEnv"]
