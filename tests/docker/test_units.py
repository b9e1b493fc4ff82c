"""Docker backend pieces that need no daemon: paths, options, archives, owners, cgroup lookup, the CLI flag."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.backends.docker import cgroup as cgroup_mod
from orchestrator.backends.docker import steps
from orchestrator.backends.docker.backend import container_path, task_trees
from orchestrator.backends.docker.labels import Owner
from orchestrator.isolation.cgroups import Mounts, TrialCgroupV1, TrialCgroupV2
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.experiment import Experiment
from orchestrator.tasks.environment_image import environment_digest

from .conftest import FIXTURES
from .helpers import headroom


def test_step_scripts_map_to_the_contract_paths() -> None:
    assert container_path("solution/solve.sh") == "/solution/solve.sh"
    assert container_path("tests/test.sh") == "/tests/test.sh"
    assert container_path("environment/setup.sh") == "/headroom/task/environment/setup.sh"


def test_the_agent_never_gets_the_tests_and_only_the_oracle_the_solution(tmp_path: Path) -> None:
    task = FIXTURES / "hello-world-app"
    agent = dict(task_trees(task, "/headroom/task", solution=False))
    oracle = dict(task_trees(task, "/headroom/task", solution=True))
    assert not any(p.relative_to(task).parts[0] == "tests" for p in [*agent, *oracle])
    assert task / "solution" not in agent and oracle[task / "solution"] == "/headroom/task/solution"
    assert agent[task / "instruction.md"] == "/headroom/task/instruction.md"


def test_experiment_docker_section() -> None:
    exp = Experiment.model_validate({"tasks_dir": ".", "backend": "docker", "docker": {"build": True}})
    assert exp.docker == DockerOptions(build=True)
    with pytest.raises(ValidationError):
        Experiment.model_validate({"tasks_dir": ".", "docker": {"buidl": True}})  # typos are refused


def test_build_flag_is_for_the_docker_backend_only(tmp_path: Path) -> None:
    res = headroom("sweep", str(FIXTURES), "--build", "--store", str(tmp_path / "r.db"))
    assert res.returncode == 2
    assert "--build applies to --backend docker" in res.stderr and "Traceback" not in res.stderr


def test_an_unreachable_daemon_is_a_one_line_error(tmp_path: Path) -> None:
    res = headroom(
        "sweep",
        str(FIXTURES),
        "--backend",
        "docker",
        "--store",
        str(tmp_path / "r.db"),
        env={"DOCKER_HOST": f"unix://{tmp_path}/nothing.sock"},
    )
    assert res.returncode == 2
    assert "cannot reach the Docker daemon" in res.stderr and "Traceback" not in res.stderr


def test_archive_keeps_modes_owns_everything_as_root_and_links(tmp_path: Path) -> None:
    src = tmp_path / "tests"
    src.mkdir()
    (src / "test.sh").write_text("echo 1\n")
    (src / "test.sh").chmod(0o755)
    (src / "data.txt").write_text("x")
    data = steps.tree_archive(
        dirs=[("/logs/verifier", 0o777)],
        trees=[(src, "/tests")],
        files=[("/headroom/x", b"hi", 0o600)],
        links=[("/headroom/vt/tests", "/tests")],
    )
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["logs/verifier"].isdir() and members["logs/verifier"].mode == 0o777
    assert members["tests/test.sh"].mode & 0o111 and members["tests/test.sh"].uid == 0
    assert members["tests/data.txt"].uname == "root"
    assert members["headroom/x"].size == 2
    assert members["headroom/vt/tests"].issym() and members["headroom/vt/tests"].linkname == "/tests"


def test_output_tail_keeps_the_end() -> None:
    t = steps._Tail()
    for i in range(5000):
        t.add(f"{i}\n".encode())
    text = t.text()
    assert text.endswith("4999\n") and len(text.encode()) <= steps.TAIL_BYTES


def test_environment_digest_follows_content_and_the_executable_bit(tmp_path: Path) -> None:
    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text("FROM x\n")
    first = environment_digest(env)
    (env / "Dockerfile").chmod(0o755)
    second = environment_digest(env)
    (env / "Dockerfile").write_text("FROM y\n")
    assert len({first, second, environment_digest(env)}) == 3


def test_owner_label_round_trips_and_a_dead_owner_is_dead() -> None:
    me = Owner.me()
    parsed = Owner.parse(me.label)
    assert parsed is not None and (parsed.host, parsed.pid) == (me.host, me.pid)
    assert Owner.parse(me.label).alive() is True  # type: ignore[union-attr]
    assert Owner(me.host, me.pid, me.started - 1000).alive() is False  # same pid, another start: pid reuse
    assert Owner("some-other-host", 1, 0.0).alive() is None
    assert Owner.parse("garbage") is None


def _fake_proc(tmp_path: Path, pid: int, lines: list[str]) -> Path:
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text("\n".join(lines) + "\n")
    return proc


def test_cgroup_lookup_v1_needs_the_container_id_in_the_path(tmp_path: Path) -> None:
    # A synthetic /proc and cgroup tree: lookup logic only (the real files are read in tests/docker/test_docker_backend.py).
    cid = "ab" * 32
    root = tmp_path / "cg"
    for ctrl in ("memory", "cpu,cpuacct"):
        (root / ctrl / "docker" / cid).mkdir(parents=True)
    mounts = Mounts(
        v1={
            "memory": (root / "memory", "/"),
            "cpu": (root / "cpu,cpuacct", "/"),
            "cpuacct": (root / "cpu,cpuacct", "/"),
        }
    )
    proc = _fake_proc(tmp_path, 42, [f"4:memory:/docker/{cid}", f"2:cpu,cpuacct:/docker/{cid}", "0::/"])
    cg = cgroup_mod.locate(42, cid, proc=proc, mounts=mounts)
    assert isinstance(cg, TrialCgroupV1) and cg.dirs["memory"] == root / "memory" / "docker" / cid
    assert cgroup_mod.locate(42, "cd" * 32, proc=proc, mounts=mounts) is None  # another container's pid
    assert cgroup_mod.locate(43, cid, proc=proc, mounts=mounts) is None  # no such process here


def test_cgroup_lookup_v2(tmp_path: Path) -> None:
    cid = "ef" * 32
    d = tmp_path / "unified" / "system.slice" / f"docker-{cid}.scope"
    d.mkdir(parents=True)
    (d / "memory.events").write_text("oom 1\noom_kill 1\n")
    proc = _fake_proc(tmp_path, 7, [f"0::/system.slice/docker-{cid}.scope"])
    cg = cgroup_mod.locate(7, cid, proc=proc, mounts=Mounts(v2_root=tmp_path / "unified"))
    assert isinstance(cg, TrialCgroupV2) and cg.oom_kills() == 1


@pytest.mark.skipif(not os.path.exists("/proc/self/cgroup"), reason="needs /proc")
def test_this_process_is_not_a_container() -> None:
    assert cgroup_mod.locate(os.getpid(), "0" * 64) is None


def test_usage_over_the_two_runs_of_a_container() -> None:
    """A restart gives the container a fresh cgroup: peaks are the larger run's, counters the sums."""
    from orchestrator.backends.docker.backend import merge_usage

    agent = {
        "peak": 300,
        "cpu": 1.5,
        "memory_events": {"oom_kill": 0, "under_oom": 1, "failcnt": 4},
        "cpu_throttling": {"nr_periods": 10, "nr_throttled": 2},
    }
    verifier = {
        "peak": 100,
        "cpu": 0.25,
        "memory_events": {"oom_kill": 1, "under_oom": 1, "failcnt": 1},
        "cpu_throttling": {"nr_periods": 5, "nr_throttled": 0},
    }
    merged = merge_usage([agent, verifier])
    assert merged["peak"] == 300 and merged["cpu"] == 1.75
    assert merged["memory_events"] == {"oom_kill": 1, "under_oom": 1, "failcnt": 5}
    assert merged["cpu_throttling"] == {"nr_periods": 15, "nr_throttled": 2}
    assert merge_usage([{"peak": None, "cpu": None, "usage_source": "docker stats endpoint"}]) == {
        "peak": None,
        "cpu": None,
        "usage_source": "docker stats endpoint",
    }


class _SlowDaemon:
    """Stands in for a daemon under load (which cannot be made on demand here): the step's process has exited, but
    its output reaches the stream in pieces, the last (the sanitiser's verdict line) after the drain would have
    ended counted from the exit; ``exec_inspect`` fails now and then, as a busy daemon's API does."""

    def __init__(self, pieces: list[bytes], gap_s: float) -> None:
        self.pieces, self.gap_s, self.calls = pieces, gap_s, 0

    def exec_create(self, *_a: object, **_k: object) -> dict[str, str]:
        return {"Id": "e"}

    def exec_start(self, *_a: object, **_k: object):  # type: ignore[no-untyped-def]
        import time

        for p in self.pieces:
            time.sleep(self.gap_s)
            yield p, None

    def exec_inspect(self, _id: str) -> dict[str, object]:
        import docker

        self.calls += 1
        if self.calls % 3 == 0:
            raise docker.errors.APIError("busy")
        return {"Running": False, "ExitCode": 0}


def test_a_step_whose_output_arrives_late_is_read_to_its_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import threading

    monkeypatch.setattr(steps, "DRAIN_S", 0.5)
    pieces = [f"links_removed={i}\n".encode() for i in range(4)] + [b"status=ok\n"]
    daemon = _SlowDaemon(pieces, gap_s=0.3)  # 1.5 s in all: three drains, counted from the exit
    facts = steps.run_step(
        daemon,  # type: ignore[arg-type]
        daemon,  # type: ignore[arg-type]
        "c",
        "sanitise",
        ["sh"],
        env={},
        workdir="/",
        timeout_s=60,
        cancelled=threading.Event(),
        on_expiry=lambda: None,
    )
    assert facts.stdout_tail.endswith("status=ok\n") and facts.exit_code == 0, facts
