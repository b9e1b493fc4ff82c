"""A short value named with --agent-env is still redacted (the user said it is a secret), and the sweep says what that costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agentio.redact import MIN_GUESSED_SECRET, too_short_to_redact_cleanly
from tests.cli_run import headroom as run_cli

REPO = Path(__file__).resolve().parents[2]


def test_only_set_values_shorter_than_the_bound_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HR_FLAG", "1")
    monkeypatch.setenv("HR_TOKEN_VALUE", "x" * MIN_GUESSED_SECRET)
    monkeypatch.setenv("HR_EMPTY", "")
    assert too_short_to_redact_cleanly(["HR_FLAG", "HR_TOKEN_VALUE", "HR_EMPTY", "HR_UNSET"]) == ["HR_FLAG"]


def test_the_sweep_names_a_short_variable_without_printing_its_value(tmp_path: Path) -> None:
    res = run_cli(
        "sweep",
        str(REPO / "tasks"),
        "--task",
        "csv-report",
        "--multipliers",
        "1x-strict",
        "--attempts",
        "1",
        "--no-canary",
        "--agent-env",
        "HR_SHORT_PIN",
        "--store",
        str(tmp_path / "h.db"),
        "--format",
        "none",
        env={"PATH": "/usr/bin:/bin", "HR_SHORT_PIN": "z9q"},
        inherit=False,
    )
    assert res.returncode == 0, res.stderr
    notes = [ln for ln in res.stderr.splitlines() if "HR_SHORT_PIN" in ln]
    assert len(notes) == 1 and "wiped" in notes[0] and "z9q" not in res.stderr, res.stderr
