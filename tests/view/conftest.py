"""A real store (two real sweeps) and a real `headroom view` server on loopback."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_run import headroom
from tests.cli_run import start as start_cli
from tests.taskfactory import HOG, write_task

FLAKY = (
    "python3 -c \"import os,sys; print('seed', os.environ['HEADROOM_SEED']); "
    'sys.exit(0 if int(os.environ[\'HEADROOM_SEED\']) % 3 else 1)" && touch "$HEADROOM_WORKDIR/out"\n'
)


@pytest.fixture(scope="session")
def view_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view-tasks")
    write_task(
        root,
        "hog",
        solve=HOG.format(mb=80),
        memory_mb=64,
        extra_toml='cluster_id = "memory"\nlicense_or_access = "Apache-2.0"\n',
    )
    write_task(root, "flaky", solve=FLAKY, extra_toml='cluster_id = "luck"\n')
    write_task(root, "steady", solve='echo steady work; touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path_factory.mktemp("view-store") / "h.db"
    for args in (
        ("--multipliers", "1,2,unbounded", "--attempts", "3", "--model", "model-a"),
        ("--multipliers", "1,unbounded", "--attempts", "2", "--model", "model-b"),
    ):
        res = headroom("sweep", str(root), *args, "--store", str(store), "--format", "none")
        assert res.returncode == 0, res.stderr
    return store


@pytest.fixture(scope="session")
def view_server(view_store: Path) -> Iterator[str]:
    """`headroom view --port 0` as a user starts it; yields its base URL and stops it afterwards."""
    proc = start_cli("view", "--store", str(view_store), "--port", "0", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = re.search(r"http://(127\.0\.0\.1):(\d+)/", line)
        assert m, f"no URL announced: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        yield f"http://{m.group(1)}:{m.group(2)}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
