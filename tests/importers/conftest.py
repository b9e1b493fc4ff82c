"""The fixtures are other tools' task and result files (some hold their own pytest files): not ours to collect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.inprocess import Headroom, in_process

collect_ignore = ["fixtures"]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Headroom:
    """Run ``headroom ARGS`` in this process (the CLI's own main: exit codes and one-line errors as a user sees them)."""
    return in_process(capsys, monkeypatch)


@pytest.fixture
def import_json(cli):
    def run(store: Path, *args: str, expect: int = 0) -> list[dict]:
        res = cli("results", "import", *args, "--store", str(store), "--format", "json")
        assert res.returncode == expect, res.stderr + res.stdout[-2000:]
        return json.loads(res.stdout)

    return run


@pytest.fixture
def report(cli):
    def run(store: Path, *args: str) -> dict:
        res = cli("report", "--store", str(store), "--format", "json", *args)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    return run
