"""The suite's split over xdist workers holds: tests of one shared service run on one worker, and so do the
tests that share one of the suite's module or session fixtures (each is built once, not once per worker).

tests/conftest.py marks each test that uses a shared service (the control plane and real node, the
private dockerd) with its ``xdist_group``; ``scripts/test.sh`` runs ``--dist loadgroup``. When a
pytest or xdist release breaks that (pytest 9.2 with xdist 3.8 did), every worker starts its own
plane, real node and dockerd, and they collide in ways that look like flaky tests. This checks the
mechanism itself, with the installed pytest and xdist, on a throwaway suite.
"""

from __future__ import annotations

import os
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


#: A module fixture, and a session fixture two modules share. Each build appends a line to $BUILDS.
SHARED = {
    "conftest_extra": """
import os

import pytest


@pytest.fixture(scope="session")
def session_store():
    with open(os.environ["BUILDS"], "a") as f:
        f.write("session_store\\n")
    return "store"
""",
    "test_module_fixture.py": """
import os
import time

import pytest


@pytest.fixture(scope="module")
def sweeps():
    with open(os.environ["BUILDS"], "a") as f:
        f.write("sweeps\\n")
    return "runs"


@pytest.mark.parametrize("n", range(6))
def test_reads_the_sweeps(sweeps, n):
    time.sleep(0.2)


@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    time.sleep(0.2)
""",
    "test_store_a.py": """
import time

import pytest


@pytest.mark.parametrize("n", range(3))
def test_store_a(session_store, n):
    time.sleep(0.2)
""",
    "test_store_b.py": """
import time

import pytest


@pytest.mark.parametrize("n", range(3))
def test_store_b(session_store, n):
    time.sleep(0.2)
""",
}


def test_a_module_or_session_fixture_of_the_suite_is_built_once_on_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"  # its own checkout: the builds' log stays outside it (the guard above watches it)
    tests = suite / "tests"
    tests.mkdir(parents=True)
    conftest = (REPO / "tests" / "conftest.py").read_text().replace("from tests.docker.fixtures import", "# ")
    (tests / "conftest.py").write_text(conftest + SHARED["conftest_extra"])
    for name in ("test_module_fixture.py", "test_store_a.py", "test_store_b.py"):
        (tests / name).write_text(SHARED[name])
    (tests / "test_split.py").write_text(TESTS)
    builds = tmp_path / "builds.txt"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider", "-v", "tests"],
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BUILDS": str(builds)},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, name in re.findall(r"\[(gw\d+)\].*PASSED tests/test_\w+\.py::(\w+)", res.stdout):
        workers[name].add(worker)
    assert len(workers["test_reads_the_sweeps"]) == 1, res.stdout
    assert len(workers["test_store_a"] | workers["test_store_b"]) == 1, res.stdout
    # built once each: under plain loadgroup every worker that drew one of the tests built the fixture again
    assert sorted(builds.read_text().split()) == ["session_store", "sweeps"], res.stdout
    # the shared service's group is handed out first (xdist's reordering by group size is switched off)
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.splitlines()
    assert all("test_uses_the_plane" in line for line in collected[:6]), collected


def test_the_files_the_suite_orders_by_name_exist() -> None:
    """tests/conftest.py places two files by name in their groups (the controller image's build first on its
    worker, the chart's test last on the real node's): a renamed file would lose its place silently."""
    from tests.conftest import _FIRST_IN_GROUP, _LAST_IN_GROUP

    for nodeid in _FIRST_IN_GROUP + _LAST_IN_GROUP:
        assert (REPO / nodeid.split("::")[0]).is_file(), nodeid
