"""An agent's work dir is removed whatever the agent made of it (a defect found by a hostile probe:
a directory nested a few thousand levels deep made ``shutil.rmtree`` raise RecursionError, the tree
stayed, and every later headroom start crashed while reaping it)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.backends.local.backend import LocalBackend, _stale_workroots
from orchestrator.isolation.removal import BackgroundRemoval, remove_tree

DEPTH = 3000  # far past Python's recursion limit, and past PATH_MAX (2 bytes a level, 6000 bytes)


def _deep(top: Path, depth: int = DEPTH) -> None:
    """``mkdir d; cd d`` ``depth`` times, as an agent's shell loop would (relative: no path is ever that long)."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import os\nfor _ in range({depth}):\n    os.mkdir('d'); os.chdir('d')\nopen('f', 'w').write('x')",
        ],
        cwd=top,
        check=True,
    )


@pytest.fixture(autouse=True)
def _no_deep_tree_left(tmp_path: Path) -> Iterator[None]:
    """A deep tree left in tmp_path (a failed assertion) would crash pytest's own cleanup of old tmp dirs."""
    yield
    remove_tree(tmp_path)


def test_a_tree_deeper_than_python_can_recurse_is_removed_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    tree = tmp_path / "work"
    tree.mkdir()
    _deep(tree)
    (tree / "link").symlink_to(outside)  # removing the tree must not remove what a link points at
    assert remove_tree(tree) is True
    assert not tree.exists() and (outside / "keep").read_text() == "mine"
    assert remove_tree(tree) is True  # already gone: still fine


def test_a_deep_tree_left_by_a_crashed_run_does_not_stop_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A temp dir of this test's own: a LocalBackend starting in another xdist worker reaps every dead run's
    # work root in the shared one, and once did so while this tree was being built (its mkdir then failed).
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid no process has now
    stale = temp / f"headroom-{dead.pid}"
    (stale / "trial").mkdir(parents=True)
    _deep(stale / "trial")
    assert _stale_workroots() == [stale]
    try:
        backend = LocalBackend()  # reaps what crashed runs left, as every start does
        try:
            assert not stale.exists()  # gone, and the start went on
            assert str(stale) in backend.reaped_at_start
        finally:
            backend.close()
    finally:
        remove_tree(stale)


def test_work_dirs_handed_to_the_background_removal_are_gone_once_it_drains_or_closes(tmp_path: Path) -> None:
    """Issue 32: a trial's work dir goes on the removal's own thread; nothing handed over is forgotten."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    trees = []
    for i in range(5):
        t = tmp_path / f"work-{i}"
        t.mkdir()
        (t / "f").write_text("x")
        (t / "link").symlink_to(outside)
        trees.append(t)
    _deep(trees[0])
    removal = BackgroundRemoval(backlog=2)  # more trees than its backlog: submit waits instead of piling up
    for t in trees[:3]:
        removal.submit(t)
    removal.drain()
    assert not any(t.exists() for t in trees[:3])
    for t in trees[3:]:
        removal.submit(t)
    removal.close()
    assert not any(t.exists() for t in trees) and removal.failed == []
    assert (outside / "keep").read_text() == "mine"
