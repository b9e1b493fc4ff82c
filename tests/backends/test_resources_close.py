"""A store and a backend are context managers: ``with`` closes them however the block ends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orchestrator.backends.base import Backend
from orchestrator.backends.local.backend import LocalBackend
from orchestrator.store.sqlite import Store


def test_a_store_is_closed_when_its_block_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), Store(tmp_path / "h.db") as store:
        assert store.runs() == []
        raise RuntimeError("a command failed half way")
    with pytest.raises(sqlite3.ProgrammingError):  # closed: the connection refuses work
        store.db.execute("SELECT 1")


def test_a_backend_is_closed_when_its_block_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []
    with LocalBackend(enforcement="rlimit", isolation="none") as backend:
        assert isinstance(backend, Backend)
        monkeypatch.setattr(backend, "close", lambda: closed.append(backend.name))
    assert closed == ["local"]


def test_only_a_backend_that_declares_it_forces_a_cleanup() -> None:
    with LocalBackend(enforcement="rlimit", isolation="none") as backend:
        assert not backend.abilities.force_cleanup
        with pytest.raises(ValueError, match="cannot force"):
            backend.cleanup(None, force=True)
