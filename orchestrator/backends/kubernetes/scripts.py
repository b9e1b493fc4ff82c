"""The two POSIX-sh programs a trial pod runs: the runner (task container) and the warden (tests holder)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def runner() -> str:
    return files(__package__).joinpath("runner.sh").read_text()


@cache
def warden() -> str:
    return files(__package__).joinpath("warden.sh").read_text()
