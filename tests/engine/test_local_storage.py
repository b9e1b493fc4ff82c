"""storage_mb is enforced on the local backend the kubelet's way: a trial that writes past it is evicted."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine.classify import classify
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.isolation import storage
from orchestrator.isolation.removal import remove_tree
from orchestrator.isolation.storage import DiskWatcher, measure, usage_bytes
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.tasks.loader import load_tasks
from tests.taskfactory import write_task

MIB = 1024 * 1024


def _run(root: Path, configs: list[str]) -> dict[str, tuple]:
    tasks = {t.id: t for t in load_tasks(root)}
    exp = Experiment(tasks_dir=str(root), configurations=configs, attempts=1)
    backend = LocalBackend()
    try:
        return {
            trial.config.label: (f := backend.run(build_launch("t", trial, 0, tasks[trial.task_id], exp)), classify(f))
            for trial in plan(exp, list(tasks.values()))
        }
    finally:
        backend.close()


@pytest.mark.parametrize("where", ["$HEADROOM_WORKDIR", "$TMPDIR", "$HOME"])
def test_filling_the_disk_ends_storage_limit_and_unbounded_passes(tasks_root: Path, where: str) -> None:
    # 40 MiB of real (non-sparse) data against a 16 MiB limit, written slowly enough to be caught mid-step,
    # then the agent keeps running: only the eviction can end it before its timeout.
    solve = (
        f'for i in $(seq 40); do head -c 1048576 /dev/urandom > "{where}/blob$i"; sleep 0.02; done\n'
        'touch "$HEADROOM_WORKDIR/out"; sleep 30\n'
    )
    write_task(tasks_root, "filler", solve=solve, agent_timeout=60, extra_toml="")
    toml = tasks_root / "filler" / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 64\n", "memory_mb = 64\nstorage_mb = 16\n"))
    res = _run(tasks_root, ["1x-strict"])
    facts, verdict = res["1x-strict"]
    assert (verdict.outcome, verdict.reason) == (Outcome.INFRA_ERROR, InfraReason.STORAGE_LIMIT)
    assert "over its storage limit of 16.0 MiB" in (facts.infra_detail or "")
    assert facts.agent is not None and not facts.agent.timed_out and facts.agent.duration_s < 25
    assert facts.verifier is None  # an evicted trial is not graded


def test_a_trial_under_its_storage_limit_is_not_touched(tasks_root: Path) -> None:
    solve = 'head -c 2000000 /dev/urandom > "$HEADROOM_WORKDIR/blob"; touch "$HEADROOM_WORKDIR/out"\n'
    write_task(tasks_root, "small", solve=solve)
    toml = tasks_root / "small" / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 64\n", "memory_mb = 64\nstorage_mb = 16\n"))
    facts, verdict = _run(tasks_root, ["1x-strict"])["1x-strict"]
    assert verdict.outcome is Outcome.PASSED
    assert facts.extra.storage_peak_bytes is not None and 2_000_000 <= facts.extra.storage_peak_bytes < 16 * MIB


def test_usage_counts_allocated_blocks_once_per_inode(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 1_000_000)
    (tmp_path / "b").hardlink_to(tmp_path / "a")
    (tmp_path / "link").symlink_to("/usr")  # not followed
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(1 << 30)  # 1 GiB apparent, nothing allocated
    used = usage_bytes([tmp_path])
    assert 1_000_000 <= used < 1_200_000


def _deep(top: Path, levels: int, name: str) -> int:
    """``levels`` nested directories called ``name`` under ``top``; an fd of the deepest (paths cannot reach it)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    return fd


def test_usage_is_measured_at_any_depth_with_few_descriptors(tmp_path: Path) -> None:
    # 20 x 250 characters: past PATH_MAX, where a walk by path cannot even lstat; and 3000 levels: past
    # Python's recursion limit and past the descriptors a walk could hold open one per level.
    try:
        _measure_deep(tmp_path)
    finally:
        # pytest removes old temp dirs with shutil.rmtree, which recurses: it must never meet this tree.
        assert remove_tree(tmp_path)


def _measure_deep(tmp_path: Path) -> None:
    for top, levels, name in ((tmp_path / "wide", 20, "d" * 250), (tmp_path / "chain", 3000, "d")):
        top.mkdir()
        fd = _deep(top, levels, name)
        f = os.open("blob", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
        os.write(f, b"x" * 4 * MIB)
        os.close(f)
        os.close(fd)
    open_before = len(os.listdir("/proc/self/fd"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Room for the walk's own bound and little more: a walk holding one descriptor per level would miss directories.
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_before + storage.MAX_OPEN_DIRS + 16, hard))
    try:
        used = measure([tmp_path])
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert used.bytes >= 8 * MIB and used.complete
    assert used.inodes == 1 + 2 + 20 + 3000 + 2  # tmp_path, the two tops, the directories, the two blobs
    # none left open by the walk (other threads of a long test session may close theirs meanwhile)
    assert len(os.listdir("/proc/self/fd")) <= open_before


def test_empty_files_count_as_inodes_and_a_walk_stops_past_a_ceiling(tmp_path: Path) -> None:
    for i in range(3000):
        (tmp_path / f"f{i}").touch()
    assert measure([tmp_path]).inodes == 3001
    stopped = measure([tmp_path], stop_inodes=640)
    assert stopped.inodes == 641 and not stopped.complete  # one past the ceiling is enough to evict
    assert storage.inode_ceiling(10 * MIB) == 640  # one inode per 16 KiB, mkfs.ext4's default ratio


def test_the_watcher_evicts_on_inodes_and_says_so(tmp_path: Path) -> None:
    hits: list[int] = []
    w = DiskWatcher([tmp_path], 1 * MIB, hits.append)  # 64 inodes allowed
    for i in range(100):
        (tmp_path / f"f{i}").touch()
    assert w.check() and len(hits) == 1
    assert w.peak_inodes > w.limit_inodes == 64
    assert w.detail() == (
        "the trial created 65 files and directories, over the 64 its storage limit of 1.0 MiB allows (one per 16 KiB)"
    )


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to act as another uid")
def test_a_directory_its_owner_made_unreadable_is_still_measured() -> None:
    # A headroom that is not root shares its uid with the steps, which may chmod 000 a directory to hide it.
    # Root reads through any mode, so the walk runs here as uid nobody over nobody's own files.
    top = Path(tempfile.mkdtemp(prefix="headroom-test-"))
    try:
        os.chown(top, 65534, 65534)
        # nobody may not be able to read the checkout (a clone under a 0700 folder): run a copy of the module
        module = top / "storage_copy.py"
        shutil.copyfile(storage.__file__, module)
        os.chmod(module, 0o644)
        script = textwrap.dedent(f"""
            import importlib.util, os, sys
            spec = importlib.util.spec_from_file_location("storage", {str(module)!r})  # stdlib only
            mod = sys.modules["storage"] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            os.makedirs("{top}/w/hid/den")
            open("{top}/w/hid/den/blob", "wb").write(b"x" * 4194304)
            os.chmod("{top}/w/hid/den", 0); os.chmod("{top}/w/hid", 0o100)  # not listable, nor is its parent
            print(mod.measure(["{top}/w"]).bytes)
            """)
        res = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        assert int(res.stdout) >= 4 * MIB
    finally:
        remove_tree(top)
