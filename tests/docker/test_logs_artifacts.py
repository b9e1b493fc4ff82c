"""A hostile ``/logs/agent`` on the Docker backend: kept, cut and skipped as the local backend's walk keeps them.

Issue 29 measured on main: one link to a host file beside the trajectory made the whole ``logs/`` artifact
vanish without a word (the archive was unpacked in one go, and the first refused member ended it), and a 10 GB
sparse file made headroom buffer up to 512 MiB per try. The same tree is built on the host by the same
script and walked by the sink as the local backend walks it; the two records must say the same for every
entry. Both ways the Docker backend reads the logs dir are run: the daemon's volume folder (a daemon on this
machine) and the archive endpoint streamed (a remote daemon; the volume folder hidden from the backend).
"""

from __future__ import annotations

import sqlite3
import subprocess
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.artifacts import reader
from orchestrator.artifacts.sink import StoreSink, TryKey, register, unregister
from orchestrator.backends.docker import external as docker_external
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.spec.artifacts import ArtifactsSpec
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.experiment import AgentSpec, Experiment
from orchestrator.store.sqlite import Store

from .conftest import DockerEnv
from .helpers import copy_task, run_tries

pytestmark = [pytest.mark.docker, pytest.mark.slow]

MIB = 1024 * 1024
#: Run in the logs dir (its path is $1), in the container as the agent and on the host for the local walk.
#: The agent then outlives its timeout, so nothing (the sanitiser among it) touches the tree before it is kept.
HOSTILE_LOGS = r"""
cd "$1" || exit 1
printf '{"steps": [1, 2, 3]}\n' > trajectory.json
ln -s /etc/passwd passwd
ln -s /etc/shadow "$(printf 'evil\nname')"
truncate -s 10G sparse.bin
mkfifo fifo
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
printf 'x' > "$(printf 'n\377\376')"
printf 'y' > '<img src=x onerror=alert(1)>'
mkdir -p deep/er && echo hi > deep/er/f.txt && ln -s ../../../../../etc deep/er/up
"""
CAP = 4 * MIB


@pytest.fixture
def backend(docker_env: DockerEnv, docker_host: str) -> Iterator[DockerBackend]:
    b = DockerBackend(DockerOptions(host=docker_host))
    yield b
    b.close()


def _rows(store: Path, key: TryKey) -> dict[str, tuple[str, int | None, str | None]]:
    db = sqlite3.connect(store)
    try:
        out = {}
        for a in reader.list_artifacts(db, key.run_id, key.trial_id, key.try_index):
            if a.name == "logs" or a.name.startswith("logs/"):
                out[a.name] = (a.status, a.original_size, a.detail)
        return out
    finally:
        db.close()


@pytest.mark.parametrize("way", ["volume", "archive"])
def test_a_hostile_logs_dir_is_kept_as_the_local_walk_keeps_it(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    if way == "archive":  # as for a remote daemon: its volume folder is not on this machine
        monkeypatch.setattr(docker_external, "volume_dir", lambda api, volume: None)
    root = tmp_path / "tasks"
    copy_task("tests-hidden", root, {"task.toml": ("[agent]\ntimeout_sec = 60.0", "[agent]\ntimeout_sec = 8")})
    (root / "tests-hidden" / "environment" / "logs.sh").write_text(HOSTILE_LOGS)
    store = tmp_path / "h.db"
    Store(store).close()
    sink = StoreSink(store, ArtifactsSpec(max_bytes_per_try=CAP))
    register("test-run", sink)
    exp = Experiment(
        tasks_dir=str(root),
        backend="docker",
        agent=AgentSpec(kind="command", command='bash "$HEADROOM_TASK_DIR/environment/logs.sh" /logs/agent; sleep 60'),
    )
    tracemalloc.start()
    try:
        [(facts, _verdict)] = run_tries(backend, exp, [("tests-hidden", "1x-strict")], root=root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        unregister("test-run")
    assert facts.agent is not None and facts.agent.timed_out, facts.agent
    # The 10 GB file costs the cap and the sink's slack, never the archive's size (main buffered 512 MiB).
    assert peak < 16 * CAP, peak
    [trial] = {r[0] for r in sqlite3.connect(store).execute("SELECT trial_id FROM artifacts")}
    docker_rows = _rows(store, TryKey("test-run", trial, 0))

    host = tmp_path / "host-logs"
    host.mkdir()
    subprocess.run(["bash", "-c", HOSTILE_LOGS, "logs", str(host)], check=True)
    local_key = TryKey("local-run", "t", 0)
    sink.add_tree(local_key, "logs", host)
    local_rows = _rows(store, local_key)
    sink.close()

    # a link beside the trajectory no longer loses the logs dir
    assert "logs/trajectory.json" in docker_rows or way == "archive", docker_rows
    assert (
        docker_rows["logs/passwd"]
        == local_rows["logs/passwd"]
        == (
            "skipped",
            None,
            "a symlink (not followed) to /etc/passwd",
        )
    )
    if way == "archive":
        # The Engine API's archive has no sockets (the daemon leaves them out): the one entry the walk adds.
        local_rows.pop("logs/sock")
        # A remote daemon's archive is read up to a bound (a 10 GB file's zeros go through the socket); entries
        # the daemon sends after it are not listed, and the record says so in one entry.
        cut = docker_rows.pop("logs", None)
        if cut is not None or "logs/trajectory.json" not in docker_rows:
            assert cut is not None and cut[0] == "skipped" and "archive of the logs dir" in (cut[2] or ""), cut
            local_rows = {n: r for n, r in local_rows.items() if n in docker_rows}
            assert "logs/sparse.bin" in docker_rows
    # Which regular files the cap keeps, cuts or drops depends on the order a folder lists them in, which
    # differs between two folders; their sizes, and every other entry's status and reason, do not.
    for name, (status, size, detail) in local_rows.items():
        assert name in docker_rows, (name, docker_rows)
        got = docker_rows[name]
        if status in ("stored", "truncated", "dropped"):
            assert got[0] in ("stored", "truncated", "dropped") and got[1] == size, (name, got, size)
        else:
            assert got == (status, size, detail), (name, got, (status, size, detail))
    assert set(docker_rows) == set(local_rows), set(docker_rows) ^ set(local_rows)
    assert docker_rows["logs/sparse.bin"][1] == 10 * 1024**3
