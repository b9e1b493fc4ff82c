"""`headroom compare` on real stores whose runs share no task or no configuration: one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_run import headroom
from tests.taskfactory import runs_sharing_nothing


@pytest.fixture(scope="module")
def disjoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    store = tmp_path_factory.mktemp("disjoint") / "h.db"
    return store, runs_sharing_nothing(tmp_path_factory.mktemp("disjoint-tasks"), store)


@pytest.mark.parametrize(
    "other, words",
    [
        ("other_tasks", "the runs share no task (A has alpha, beta; B has gamma)"),
        ("other_configs", "the runs share no configuration on their 2 shared task(s)"),
    ],
)
def test_nothing_to_compare_is_a_one_line_error(disjoint: tuple[Path, dict[str, str]], other: str, words: str) -> None:
    store, ids = disjoint
    for fmt in ("table", "json", "markdown"):
        res = headroom("runs", "compare", ids["base"], ids[other], "--store", str(store), "--format", fmt)
        assert res.returncode == 2, (res.returncode, res.stderr)
        assert "Traceback" not in res.stderr and res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == 1 and words in res.stderr, res.stderr


def test_shared_part_is_compared_and_said(disjoint: tuple[Path, dict[str, str]]) -> None:
    store, ids = disjoint
    res = headroom("runs", "compare", ids["base"], ids["base"], "--store", str(store), "--format", "markdown")
    assert res.returncode == 0, res.stderr
    assert "Every figure is computed on the 2 task(s) both runs hold" in res.stdout
    assert "| A:1x-strict vs B:1x-strict | 2 | 100.0% [34.2, 100.0] | 100.0% [34.2, 100.0] | +0.0 pts |" in res.stdout
