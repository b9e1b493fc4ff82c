"""Run ``headroom ARGS`` in this process through the CLI's own ``main``: exit codes and error lines as a user sees them."""

from __future__ import annotations

import pytest

from tests.inprocess import Headroom, Result, in_process

__all__ = ["Headroom", "Result", "headroom", "one_line_error"]


@pytest.fixture
def headroom(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Headroom:
    return in_process(capsys, monkeypatch)


def one_line_error(res: Result, *needles: str) -> str:
    """The mistake is refused with exit 2 in exactly one line (no traceback), naming what was wrong."""
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.lines) == 1, res.stderr
    for n in needles:
        assert n in res.lines[0], res.lines[0]
    return res.lines[0]
