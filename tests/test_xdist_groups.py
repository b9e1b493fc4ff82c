"""The suite's split over xdist workers holds: tests of one shared service run on one worker.

tests/conftest.py marks each test that uses a shared service (the control plane and real node, the
private dockerd) with its ``xdist_group``; ``scripts/test.sh`` runs ``--dist loadgroup``. When a
pytest or xdist release breaks that (pytest 9.2 with xdist 3.8 did), every worker starts its own
plane, real node and dockerd, and they collide in ways that look like flaky tests. This checks the
mechanism itself, with the installed pytest and xdist, on a throwaway suite.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TESTS = """
import time

import pytest


@pytest.fixture(scope="session")
def cluster():
    return "plane"


@pytest.mark.parametrize("n", range(6))
def test_uses_the_plane(cluster, n):
    time.sleep(0.2)


@pytest.mark.parametrize("n", range(6))
def test_plain(n):
    time.sleep(0.2)
"""


def test_tests_of_one_shared_service_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    # the suite's own grouping hook, unchanged
    (tmp_path / "tests" / "conftest.py").write_text(
        (REPO / "tests" / "conftest.py").read_text().replace("from tests.docker.fixtures import", "# ")
    )
    (tmp_path / "tests" / "test_split.py").write_text(TESTS)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-v", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, name in re.findall(r"\[(gw\d+)\].*PASSED tests/test_split.py::(\w+)", res.stdout):
        workers[name].add(worker)
    assert set(workers) == {"test_uses_the_plane", "test_plain"}, res.stdout
    assert len(workers["test_uses_the_plane"]) == 1, (
        f"the plane's tests ran on {sorted(workers['test_uses_the_plane'])}: pytest-xdist no longer groups "
        "them (see the pytest pin in pyproject.toml)\n" + res.stdout
    )
