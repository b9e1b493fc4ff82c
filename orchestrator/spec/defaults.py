"""Experiment defaults and bounds, in a module without pydantic so the CLI's --help can show them cheaply."""

from __future__ import annotations

DEFAULT_MULTIPLIERS = ("1", "1.5", "2", "3", "unbounded")
#: A task's timeouts scaled past this are no longer timeouts (1e9 x 600 s overflows a timedelta).
MAX_TIMEOUT_MULTIPLIER = 100.0
