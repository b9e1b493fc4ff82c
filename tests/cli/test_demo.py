"""`headroom demo` is findable afterwards and says what it is: its first line names its agent as scripted and its
costs as synthetic, and it writes to the default store, so a plain `headroom runs` lists it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.commands.options import DEFAULT_STORE
from tests.cli.conftest import Headroom


@pytest.mark.slow
def test_demo_says_its_agent_is_scripted_first_and_lands_in_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, headroom: Headroom
) -> None:
    monkeypatch.chdir(tmp_path)  # the default store is relative to where the user stands
    res = headroom("demo", "--attempts", "1")
    assert res.returncode == 0, res.stderr
    first = res.lines[0]
    assert "scripted" in first and "not real spend" in first, first
    assert (tmp_path / DEFAULT_STORE).is_file() and not (tmp_path / "headroom-results" / "demo.db").exists()
    assert "headroom runs" in res.stderr  # the closing line says how to find it again

    listing = headroom("runs", "--json")
    assert listing.returncode == 0, listing.stderr
    runs = json.loads(listing.stdout)["runs"]
    assert [r["name"] for r in runs] == ["demo"], runs
