"""Shared fixtures, and how the suite splits over pytest-xdist workers."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

# One private dockerd per session, for tests/docker and the real-node tests that build images with it.
from tests.docker.fixtures import docker_env, docker_host  # noqa: F401

#: Session fixtures that start a shared service (a control plane, the real node, a private
#: dockerd or Podman service). Each pytest process starts its own copy of what its tests use,
#: so under xdist (``--dist loadgroup``) every test that uses one goes to one worker: a service
#: starts once per group, and the other workers take the rest. The first group that applies wins.
#:
#: * ``realnode``: the real node (kubelet + containerd on this host) must be the only one here:
#:   two kubelets would share the host's cgroup tree. Its tests are most of the suite's waiting
#:   (pods, image builds), so they get a worker, and a control plane, of their own.
#: * ``kube``: the kwok-only cluster tests, on a second control plane (two planes share nothing:
#:   each has its own etcd, ports and state dir).
#: * ``engine``: the private dockerd and Podman service (a realnode test that builds an image
#:   starts its worker's own dockerd; two dockerds keep to their own roots).
_SERVICE_GROUPS = (
    ("realnode", ("real_node",)),
    ("kube", ("cluster", "namespace")),
    ("engine", ("docker_env", "docker_host", "podman_env", "engine_env")),
)


def service_group(fixturenames: list[str]) -> str | None:
    """The xdist group of a test that uses a shared service (the first that applies), else None."""
    for group, fixtures in _SERVICE_GROUPS:
        if any(f in fixturenames for f in fixtures):
            return group
    return None


def _in_the_suite(func: object) -> bool:
    code = getattr(func, "__code__", None)
    return code is not None and Path(code.co_filename).resolve().is_relative_to(_SUITE)


_SUITE = Path(__file__).resolve().parent


def wide_fixtures(item: pytest.Item) -> set[str]:
    """The suite's own fixtures wider than a test that ``item`` uses: a session fixture by its name, a module,
    class or package fixture by its module. Pytest's own (``tmp_path_factory``) cost nothing and are left out."""
    info = getattr(item, "_fixtureinfo", None)
    keys: set[str] = set()
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in info.name2fixturedefs.get(name, ()) if info is not None else ():
            if fixturedef.scope == "function" or not _in_the_suite(fixturedef.func):
                continue
            keys.add(f"fixture:{name}" if fixturedef.scope == "session" else f"module:{item.nodeid.split('::')[0]}")
    return keys


def shared_fixture_groups(items: list[pytest.Item]) -> dict[str, str]:
    """The xdist group of each test (by node id) that shares a wide fixture of the suite's with another test.

    ``--dist loadgroup`` hands every ungrouped test out on its own, so the tests of one module land on every
    worker and each worker builds the module's fixture again: a module fixture that runs three sweeps ran them
    up to three times. Tests that share such a fixture, directly or through another test, form one group (the
    smallest key of their connected set names it), so each fixture is built once.
    """
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    uses = {item.nodeid: sorted(wide_fixtures(item)) for item in items}
    for keys in uses.values():
        for key in keys[1:]:
            a, b = root(keys[0]), root(key)
            parent[max(a, b)] = min(a, b)
    return {nodeid: root(keys[0]) for nodeid, keys in uses.items() if keys}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks into the test's id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    shared = shared_fixture_groups(items)
    first = [group for group, _ in _SERVICE_GROUPS]
    rank: dict[str, int] = {}
    for item in items:
        group = service_group(list(getattr(item, "fixturenames", ()))) or shared.get(item.nodeid)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        rank[item.nodeid] = first.index(group) if group in first else len(first)
    # The services' groups first, the real node's at their head: xdist hands out work in this order, and the real
    # node's group is the suite's longest chain (pods, image imports), so it starts at once on a worker of its own.
    # Within a group, _FIRST_IN_GROUP's tests lead and _LAST_IN_GROUP's trail (the controller image's build).
    items.sort(key=lambda item: (rank[item.nodeid], _place_in_group(item.nodeid)))  # stable: the rest keep their order


#: The controller image is built (about a minute, more under load) by the first test that asks for it
#: (tests/cluster/controller_image.py, one build at a time): the engine worker's image test, first in its group,
#: builds it at the suite's start, and the real node's chart test, last in the suite's longest group, imports it.
_FIRST_IN_GROUP = ("tests/docker/test_controller_image.py::",)
_LAST_IN_GROUP = ("tests/cluster/test_controller_realnode.py::",)


def _place_in_group(nodeid: str) -> int:
    if nodeid.startswith(_FIRST_IN_GROUP):
        return 0
    return 2 if nodeid.startswith(_LAST_IN_GROUP) else 1


def pytest_configure(config: pytest.Config) -> None:
    # xdist would otherwise sort the groups by their number of tests and hand out the largest first, which put
    # the real node's group behind a longer-listed one on the same worker; keep the order set above.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


REPO = Path(__file__).resolve().parents[1]


def in_ci() -> bool:
    """CI sets ``CI`` (``CI=true bash .ci/run``); there a missing requirement is a failure, never a skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


#: Skips an operator asks for by name (``HEADROOM_SKIP_DOCKER=1`` and the like) stay skips under CI: CI's
#: own command sets none of them. Every other skip under CI means a requirement (the sandbox, writable
#: cgroups, a daemon, the browser) was missing where the install scripts should have provided it.
_REQUESTED_SKIP = "HEADROOM_SKIP_"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or not in_ci() or hasattr(report, "wasxfail"):
        return
    reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if _REQUESTED_SKIP in reason:
        return
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, where every test must run: {reason}"


def _untracked() -> set[str]:
    """Files and folders in the checkout that git neither tracks nor ignores."""
    res = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=normal"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return {line[3:] for line in res.stdout.splitlines() if line.startswith("?? ")} if res.returncode == 0 else set()


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controlling process, once per run
        session.config.stash[_UNTRACKED] = _untracked()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test writes into its tmp_path, never into the checkout (an empty file named ``oom`` once got committed)."""
    before = session.config.stash.get(_UNTRACKED, None)
    if before is None:
        return
    left = sorted(_untracked() - before)
    if left:
        tw = session.config.get_terminal_writer()
        tw.line()
        tw.line(f"tests left files in the checkout: {', '.join(left)} (write into tmp_path)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_UNTRACKED = pytest.StashKey[set[str]]()


@pytest.fixture(autouse=True)
def _writes_nothing_into_the_checkout(request: pytest.FixtureRequest) -> Iterator[None]:
    """Names the test during which a new entry appeared at the top of the checkout (the session check
    names only the file; under xdist the writer may be the other worker's test of the same moment)."""
    before = set(os.listdir(REPO))
    yield
    new = sorted(set(os.listdir(REPO)) - before)
    if new:  # what .gitignore names (test-artifacts/, a screenshot folder) may appear
        ignored = subprocess.run(
            ["git", "check-ignore", "--", *new], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.splitlines()  # each name as given: listdir's, with no trailing slash
        new = [n for n in new if n not in ignored]
    if new:
        pytest.fail(
            f"{', '.join(new)} appeared in the checkout while {request.node.nodeid} ran (write into tmp_path)",
            pytrace=False,
        )


@pytest.fixture
def tasks_root(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    root.mkdir()
    return root
