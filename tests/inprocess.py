"""Run ``headroom ARGS`` in this process through the CLI's own ``main``: exit codes and error lines as a user sees them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


Headroom = Callable[..., Result]


def in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Headroom:
    """A ``headroom(*args) -> Result`` for a fixture to hand out (faster than a subprocess per command)."""
    from orchestrator.cli import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["headroom", *args])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return run
