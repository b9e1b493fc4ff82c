"""Run ``headroom ARGS`` in this process through the CLI's own ``main``: exit codes and error lines as a user sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inprocess import Headroom, Result, in_process
from tests.taskfactory import write_task

__all__ = ["Headroom", "Result", "headroom", "one_line_error"]

OK_SOLVE = 'touch "$HEADROOM_WORKDIR/out"\n'


@pytest.fixture
def headroom(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Headroom:
    return in_process(capsys, monkeypatch)


@pytest.fixture
def tasks(tasks_root: Path) -> Path:
    """A task set of one task that passes."""
    write_task(tasks_root, "t", solve=OK_SOLVE)
    return tasks_root


@pytest.fixture
def swept(tasks: Path, tmp_path: Path, headroom: Headroom) -> Path:
    """A store holding one finished two-trial sweep named 'first'."""
    store = tmp_path / "h.db"
    res = headroom(
        "sweep",
        str(tasks),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "1",
        "--store",
        str(store),
        "--format",
        "none",
        "--no-canary",
        "--name",
        "first",
    )
    assert res.returncode == 0, res.stderr
    return store


def one_line_error(res: Result, *needles: str) -> str:
    """The mistake is refused with exit 2 in exactly one line (no traceback), naming what was wrong."""
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.lines) == 1, res.stderr
    for n in needles:
        assert n in res.lines[0], res.lines[0]
    return res.lines[0]
