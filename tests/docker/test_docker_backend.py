"""The Docker backend against a real dockerd (Debian's docker.io 20.10, its own data root and socket).

Tests that take ``engine_env``/``engine_host`` (or ``backend``) run twice: on that dockerd and on
a private rootful Podman 4.3 service (Debian's podman) speaking the same Engine API.
Tasks are the Terminal-Bench 2 layout fixtures of tests/fixtures/tb2, run unmodified.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.experiment import AgentSpec, Experiment
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.spec.resources import MIB
from tests.cli_run import start as start_cli

from .conftest import FIXTURES, REPO, DockerEnv
from .helpers import copy_task, evidence, headroom, outcomes, run_tries

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _experiment(**kw: object) -> Experiment:
    return Experiment(**{"tasks_dir": str(FIXTURES), "backend": "docker", **kw})  # type: ignore[arg-type]


@pytest.fixture
def backend(engine_env: DockerEnv, engine_host: str) -> Iterator[DockerBackend]:
    b = DockerBackend(DockerOptions(host=engine_host))
    assert b.engine == engine_env.engine  # the backend tells the engines apart by what the daemon says it is
    yield b
    b.close()


def test_tb2_tasks_run_unmodified_with_the_oracle(engine_env: DockerEnv, engine_host: str, tmp_path: Path) -> None:
    """The whole CLI path: `headroom sweep --backend docker --build` on Terminal-Bench 2 layout tasks."""
    store = tmp_path / "r.db"
    res = headroom(
        "sweep",
        str(FIXTURES),
        "--backend",
        "docker",
        "--build",
        "--task",
        "hello-world-app",
        "--task",
        "tests-hidden",
        "--multipliers",
        "1x-strict",
        "--attempts",
        "1",
        "--agent",
        "oracle",
        "--store",
        str(store),
        "--format",
        "none",
    )
    assert res.returncode == 0, res.stderr
    assert "backend: docker" in res.stderr
    assert outcomes(store) == {
        ("hello-world-app", "1x-strict", 0): "passed",
        ("tests-hidden", "1x-strict", 0): "passed",
    }
    for ev in evidence(store):
        assert ev["enforcement"] == "docker"
        assert ev["extra"]["image"]["id"].startswith("sha256:")  # what ran, whatever the tag says
        assert ev["extra"]["image"]["built_here"] is True
        # one daemon, one host: the engine records what each try ran beside, against the daemon's memory
        assert ev["extra"]["overcommit"]["scope"] == "host" and ev["extra"]["overcommit"]["capacity_bytes"] > 0
        assert ev["verifier"]["exit_code"] == 0
    hello = next(e for e in evidence(store) if "PASSED test_env_tables" in e["verifier"]["stdout_tail"])
    assert "FAILED" not in hello["verifier"]["stdout_tail"]
    assert engine_env.managed_containers() == []  # every try's container is gone


def test_run_provenance_names_the_daemon(engine_env: DockerEnv, engine_host: str, tmp_path: Path) -> None:
    from orchestrator.store.sqlite import Store

    store_path = tmp_path / "r.db"
    res = headroom(
        "sweep",
        str(FIXTURES),
        "--backend",
        "docker",
        "--build",
        "--task",
        "tests-hidden",
        "--multipliers",
        "1x-strict",
        "--attempts",
        "1",
        "--store",
        str(store_path),
        "--format",
        "none",
    )
    assert res.returncode == 0, res.stderr
    store = Store.open_existing(store_path)
    prov = store.provenance(store.run().run_id)
    store.close()
    text = json.dumps(prov.to_stored())
    assert "cgroup_driver" in text and '"isolation": "container"' in text
    version = {"docker": '"engine_version": "20.10', "podman": '"engine_version": "4.3'}[engine_env.engine]
    assert f'"engine": "{engine_env.engine}"' in text and version in text


def test_memory_spike_is_oom_killed_at_1x_strict_and_passes_unbounded(backend: DockerBackend) -> None:
    (strict, v_strict), (unb, v_unb) = run_tries(
        backend, _experiment(), [("memory-spike", "1x-strict"), ("memory-spike", "unbounded")]
    )
    assert v_strict.outcome is Outcome.INFRA_ERROR and v_strict.reason is InfraReason.OOM_KILLED
    assert strict.limit_memory_bytes == 64 * MIB  # task.toml says memory = "64M"
    assert strict.agent is not None and strict.agent.oom_kills >= 1
    # The kernel's counter in the container's own cgroup. dockerd's state agrees; Podman 4.3 sets
    # State.OOMKilled only for PID 1 (the keep-alive), never for an exec'd step's process.
    assert "oom_kill counter" in (strict.agent.oom_evidence or "")
    on_docker = backend.engine == "docker"
    assert ("State.OOMKilled" in (strict.agent.oom_evidence or "")) is on_docker
    assert strict.extra.container_state is not None and strict.extra.container_state.OOMKilled is on_docker
    assert strict.verifier is None  # an OOM-killed agent is not graded
    assert strict.peak_memory_bytes is not None and strict.peak_memory_bytes <= 64 * MIB

    assert v_unb.outcome is Outcome.PASSED, unb
    assert unb.limit_memory_bytes is None
    assert unb.peak_memory_bytes is not None and unb.peak_memory_bytes > 150 * MIB  # nothing capped it
    assert unb.extra.container_state is not None and unb.extra.container_state.OOMKilled is False


def test_exit_137_alone_is_not_an_oom(backend: DockerBackend, tmp_path: Path) -> None:
    """An agent killed by SIGKILL for another reason exits 137 too: that is not an OOM kill."""
    root = tmp_path / "tasks"
    copy_task(
        "tests-hidden",
        root,
        {"solution/solve.sh": ("echo 42 > /app/answer.txt", "echo 42 > /app/answer.txt; kill -9 $$")},
    )
    [(facts, verdict)] = run_tries(
        backend, _experiment(tasks_dir=str(root)), [("tests-hidden", "1x-strict")], root=root
    )
    assert facts.agent is not None and facts.agent.exit_code == 137
    assert facts.agent.oom_kills == 0
    assert verdict.outcome is Outcome.PASSED  # the verifier judges the work, whatever the agent's exit


def test_requests_and_limits_reach_the_container(engine_env: DockerEnv, engine_host: str) -> None:
    docker_env, docker_host = engine_env, engine_host
    b = DockerBackend(DockerOptions(host=docker_host, keep_containers=True, build=True))
    try:
        results = run_tries(b, _experiment(), [("hello-world-app", "1x/2x"), ("hello-world-app", "unbounded")])
        assert [v.outcome for _, v in results] == [Outcome.PASSED, Outcome.PASSED]
        kept = {c["Labels"]["headroom.dev/config"]: c for c in docker_env.managed_containers()}
        bounded = docker_env.client.api.inspect_container(kept["1x_2x"]["Id"])["HostConfig"]
        assert bounded["Memory"] == 512 * MIB and bounded["MemorySwap"] == 512 * MIB  # limit 2 x 256M, no swap
        assert bounded["MemoryReservation"] == 256 * MIB  # request 1x
        assert (bounded["CpuQuota"], bounded["CpuPeriod"], bounded["CpuShares"]) == (200_000, 100_000, 1024)
        assert bounded["NetworkMode"] == "none"  # allow_internet = false
        free = docker_env.client.api.inspect_container(kept["unbounded"]["Id"])["HostConfig"]
        assert free["Memory"] == 0 and free["CpuQuota"] == 0  # unbounded: no limit at all
        assert free["MemoryReservation"] == 256 * MIB and free["CpuShares"] == 1024  # the request still holds
    finally:
        b.options = DockerOptions(host=docker_host)
        b.close()
        for c in docker_env.managed_containers():
            docker_env.client.api.remove_container(c["Id"], force=True, v=True)
        for v in docker_env.client.api.volumes(filters={"label": "headroom.dev/managed=true"}).get("Volumes") or []:
            docker_env.client.api.remove_volume(v["Name"], force=True)  # kept with the containers


PEEK = r"""
for d in /tests /solution; do if [ -e "$d" ]; then echo "$d: present"; ls -la "$d"; else echo "$d: absent"; fi; done
# Try to grade ourselves: plant a test script, a reward, and a process that keeps rewriting it.
mkdir -p /tests /logs/verifier
printf '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n' > /tests/test.sh
echo 1 > /logs/verifier/reward.txt
setsid sh -c 'while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.05; done' >/dev/null 2>&1 &
echo 41 > /app/answer.txt
echo "cwd=$(pwd)"
"""


def test_an_agent_cannot_read_or_forge_the_tests(backend: DockerBackend) -> None:
    exp = _experiment(agent=AgentSpec(kind="command", command=PEEK))
    [(facts, verdict)] = run_tries(backend, exp, [("tests-hidden", "1x-strict")])
    assert facts.agent is not None
    out = facts.agent.stdout_tail
    assert "/tests: absent" in out  # nothing of the tests while the agent runs
    assert "/solution: absent" in out  # the solution is the oracle's only
    assert "cwd=/app" in out  # the image's WORKDIR
    # The planted test.sh, reward and rewriting process count for nothing: the real verifier ran and failed it.
    assert verdict.outcome is Outcome.FAILED
    assert facts.reward == 0.0


def test_an_agent_over_its_budget_times_out_and_is_stopped(backend: DockerBackend) -> None:
    [(facts, verdict)] = run_tries(backend, _experiment(), [("slow-agent", "1x-strict")])
    assert verdict.outcome is Outcome.TIMEOUT
    assert facts.agent is not None and facts.agent.timed_out
    assert facts.agent.duration_s < 15  # 3 s budget; the sleeping processes did not hold the try


def test_a_task_image_that_cannot_be_had_is_an_infra_error(docker_host: str) -> None:
    """Terminal-Bench 2 tasks name a docker_image; offline and without --build there is none to run."""
    b = DockerBackend(DockerOptions(host=docker_host, pull=False))
    try:
        [(facts, verdict)] = run_tries(b, _experiment(), [("hello-world-app", "1x-strict")])
    finally:
        b.close()
    assert verdict.outcome is Outcome.INFRA_ERROR and verdict.reason is InfraReason.IMAGE_PULL
    assert "headroom.local/tb2-hello-world-app:20251130" in (facts.infra_detail or "")


def test_a_broken_dockerfile_fails_every_try_with_one_build(backend: DockerBackend, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    copy_task("tests-hidden", root, {"environment/Dockerfile": ("WORKDIR /app", "WORKDIR /app\nRUN exit 3")})
    results = run_tries(
        backend,
        _experiment(tasks_dir=str(root)),
        [("tests-hidden", "1x-strict"), ("tests-hidden", "unbounded")],
        root=root,
    )
    for facts, verdict in results:
        assert verdict.reason is InfraReason.IMAGE_PULL
        assert "environment/Dockerfile failed" in (facts.infra_detail or "")


def test_gpus_are_refused_before_anything_runs(docker_host: str, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    copy_task("tests-hidden", root, {"task.toml": ('memory = "128M"', 'memory = "128M"\ngpus = 1')})
    res = headroom(
        "sweep",
        str(root),
        "--backend",
        "docker",
        "--attempts",
        "1",
        "--multipliers",
        "1x-strict",
        "--store",
        str(tmp_path / "r.db"),
        "--format",
        "none",
    )
    assert res.returncode == 2
    assert "GPUs: 1 task needs GPUs, which the docker backend cannot give" in res.stderr
    assert "Traceback" not in res.stderr


def test_cancel_removes_the_container_and_cleanup_keeps_a_live_owners(
    docker_env: DockerEnv, docker_host: str, tmp_path: Path
) -> None:
    root = tmp_path / "tasks"
    copy_task("slow-agent", root, {"task.toml": ("timeout_sec = 3.0", "timeout_sec = 120.0")})
    exp = _experiment(tasks_dir=str(root))
    from orchestrator.engine.launch import build_launch
    from orchestrator.spec.resources import ResourceConfig
    from orchestrator.spec.trial import Trial
    from orchestrator.tasks.loader import load_tasks

    [task] = load_tasks(root)
    trial = Trial(trial_id="t", task_id=task.id, config=ResourceConfig.parse("1x-strict"), attempt=0, seed=1, order=0)
    a = DockerBackend(DockerOptions(host=docker_host))
    other = DockerBackend(DockerOptions(host=docker_host))
    try:
        h = a.submit(build_launch("live-run", trial, 0, task, exp))
        _wait_running(docker_env)
        report = other.cleanup()
        assert report.removed == []
        # the try's containers (the agent's; the verifier's, once made while the agent runs) and its two volumes
        mine = [k for k in report.kept if "live-run" in k]
        assert all("still running" in k for k in mine), report.kept
        assert sum(k.startswith("volume live-run") for k in mine) == 2, report.kept
        assert any(k.startswith("container live-run-t-0-") and "-verifier" not in k for k in mine), report.kept
        a.cancel(h)
        deadline = time.monotonic() + 30
        while a.observe(h) is None and time.monotonic() < deadline:
            a.wait([h], 0.5)
        assert docker_env.managed_containers() == []
    finally:
        a.close()
        other.close()


def _wait_running(docker_env: DockerEnv, timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [c for c in docker_env.managed_containers() if c["State"] == "running"]
        if running:
            return running
        time.sleep(0.2)
    raise AssertionError("no try container started")


def _sleepy_task(root: Path, volume: bool = False) -> None:
    """A task whose agent takes a few seconds, so a CLI can be killed in the middle of it."""
    copy_task(
        "tests-hidden",
        root,
        {
            "solution/solve.sh": ("echo 42 > /app/answer.txt", "sleep 6\necho 42 > /app/answer.txt"),
            **({"environment/Dockerfile": ("WORKDIR /app", "WORKDIR /app\nVOLUME /data")} if volume else {}),
        },
    )


def _start_cli(root: Path, store: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return start_cli(
        "sweep",
        str(root),
        "--backend",
        "docker",
        "--multipliers",
        "1x-strict",
        "--attempts",
        "1",
        "--store",
        str(store),
        "--format",
        "none",
        cwd=REPO,
        env={**env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_kill_9_of_the_cli_then_cleanup_leaves_nothing(engine_env: DockerEnv, engine_host: str, tmp_path: Path) -> None:
    docker_env, docker_host = engine_env, engine_host
    root = tmp_path / "tasks"
    _sleepy_task(root, volume=True)
    cli = _start_cli(root, tmp_path / "r.db", {"DOCKER_HOST": docker_host})
    try:
        [running] = _wait_running(docker_env)
    finally:
        cli.send_signal(signal.SIGKILL)  # no chance to clean up
        cli.wait(30)
    api = docker_env.client.api
    assert api.inspect_container(running["Id"])["State"]["Running"]  # the crash left it behind...
    volumes = [m["Name"] for m in api.inspect_container(running["Id"])["Mounts"] if m["Type"] == "volume"]
    assert volumes  # ... with the anonymous volume of the image's VOLUME /data
    res = headroom("runs", "cleanup", "--backend", "docker", env={"DOCKER_HOST": docker_host})
    assert res.returncode == 0, res.stderr
    assert f"removed container {running['Names'][0].lstrip('/')}" in res.stdout
    assert docker_env.managed_containers() == []
    left = {v["Name"] for v in api.volumes().get("Volumes") or []}
    assert not (left & set(volumes))


def test_resume_after_kill_9_replaces_the_orphaned_try(docker_env: DockerEnv, docker_host: str, tmp_path: Path) -> None:
    """adopt() cannot take over a try whose steps were driven by the dead CLI: it removes the container and the
    engine runs the try again."""
    root = tmp_path / "tasks"
    _sleepy_task(root)
    store = tmp_path / "r.db"
    cli = _start_cli(root, store, {"DOCKER_HOST": docker_host})
    try:
        [orphan] = _wait_running(docker_env)
    finally:
        cli.send_signal(signal.SIGKILL)
        cli.wait(30)
    res = headroom("resume", "--store", str(store), "--format", "none", env={"DOCKER_HOST": docker_host})
    assert res.returncode == 0, res.stderr
    assert outcomes(store) == {("tests-hidden", "1x-strict", 0): "passed"}
    assert docker_env.managed_containers() == []
    ids = [c["Id"] for c in docker_env.client.api.containers(all=True)]
    assert orphan["Id"] not in ids


def test_without_the_hosts_cgroup_files_the_api_gives_the_oom_verdict(
    backend: DockerBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon on another machine (Docker Desktop's VM, a remote host): its containers' cgroups are not
    readable here. That cannot be set up on this machine, so the lookup is made to fail; the verdict then
    comes from the daemon's 'oom' events and State.OOMKilled, the usage from its stats endpoint."""
    from orchestrator.backends.docker import backend as backend_mod

    monkeypatch.setattr(backend_mod.cgroup_mod, "locate", lambda *a, **k: None)
    (strict, v_strict), (unb, v_unb) = run_tries(
        backend, _experiment(), [("memory-spike", "1x-strict"), ("memory-spike", "unbounded")]
    )
    if backend.engine == "podman":
        # Podman's API reports no OOM kill of a step's process: without the cgroup nothing could tell
        # one from a failure, so the backend refuses the try (and says so in its abilities).
        for facts, verdict in ((strict, v_strict), (unb, v_unb)):
            assert verdict.reason is InfraReason.OTHER and facts.infra_detail == backend_mod.PODMAN_OOM_NOTE
            assert facts.agent is None
        assert backend_mod.PODMAN_OOM_NOTE in backend.abilities.notes
        return
    assert v_strict.reason is InfraReason.OOM_KILLED
    assert strict.agent is not None and strict.agent.oom_kills >= 1
    assert "docker 'oom' events" in (strict.agent.oom_evidence or "")
    assert strict.extra.cgroup is None and strict.extra.usage_source == "docker stats endpoint"
    assert v_unb.outcome is Outcome.PASSED and unb.agent is not None and unb.agent.oom_kills == 0
    assert unb.peak_memory_bytes is not None and unb.peak_memory_bytes > 150 * MIB  # cgroup v1 daemon: max_usage


#: Spin until 0.6 s of CPU time are spent: at a 0.25-core quota that takes at least 2.4 s of wall time.
BUSY = "python3 -c 'import time\nwhile time.process_time() < 0.6: pass'"


def test_cpu_quota_binds_and_unbounded_has_none(backend: DockerBackend, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    copy_task("tests-hidden", root, {"task.toml": ("cpus = 1", "cpus = 0.25")})
    exp = _experiment(tasks_dir=str(root), agent=AgentSpec(kind="command", command=BUSY))
    (strict, _), (unb, _) = run_tries(
        backend, exp, [("tests-hidden", "1x-strict"), ("tests-hidden", "unbounded")], root=root
    )
    assert strict.limit_cpus == 0.25
    # The container's cgroup ran under a CFS quota (periods are counted only then) and never got more than it.
    assert strict.extra.cpu_throttling is not None and (strict.extra.cpu_throttling.nr_periods or 0) > 0
    assert strict.cpu_time_s is not None and strict.cpu_time_s >= 0.6
    assert strict.cpu_time_s <= 0.25 * strict.duration_s + 0.1
    # Throttled periods show up whenever the machine leaves the try more than its quota (load-dependent here).
    assert strict.extra.cpu_throttling.nr_throttled is not None
    assert unb.extra.cpu_throttling is not None and unb.extra.cpu_throttling.nr_periods == 0  # no quota at all


def test_a_private_daemon_leaves_nothing_behind(docker_env: DockerEnv) -> None:
    """The fixture's own promise, checked on a second daemon: no process, folder, mount or cgroup survives stop()."""
    import shutil

    import docker as docker_sdk

    from .daemon import PrivateDockerd, _mounts_under
    from .fixtures import _base_archive

    name, archive = _base_archive()
    d = PrivateDockerd(shutil.which("dockerd") or "dockerd")
    d.start()
    c = docker_sdk.DockerClient(base_url=d.host, timeout=120)
    try:
        with archive.open("rb") as f:
            c.api.load_image(f)
        cid = c.api.create_container(
            name, ["sleep", "infinity"], host_config=c.api.create_host_config(network_mode="none")
        )["Id"]
        c.api.start(cid)
        pid = c.api.inspect_container(cid)["State"]["Pid"]
        assert Path(f"/proc/{pid}").exists()
    finally:
        c.close()
        d.stop()
    assert d.proc is not None and d.proc.poll() is not None
    assert not Path(f"/proc/{pid}").exists()  # the container's process went with its daemon
    assert not d.root.exists() and _mounts_under(d.root) == []
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{d.cgroup_parent.lstrip('/')}"))


def test_a_private_podman_leaves_nothing_behind(podman_env: DockerEnv) -> None:
    """The Podman fixture's promise, on a second service: no process (the conmons of a container and of an
    exec included), folder or mount survives stop(). The fixed paths and the cgroup parent are shared
    with the session's service, so they stay while it runs."""
    import shutil

    import docker as docker_sdk

    from .daemon import _mounts_under
    from .fixtures import _base_archive
    from .podman import PrivatePodman

    name, archive = _base_archive()
    d = PrivatePodman(shutil.which("podman") or "podman")
    d.start()
    c = docker_sdk.DockerClient(base_url=d.host, timeout=120)
    try:
        with archive.open("rb") as f:
            for _ in c.api.load_image(f):
                pass
        cid = c.api.create_container(
            name, ["sleep", "infinity"], host_config=c.api.create_host_config(network_mode="none")
        )["Id"]
        c.api.start(cid)
        exec_id = c.api.exec_create(cid, ["true"])["Id"]
        c.api.exec_start(exec_id)
        pid = c.api.inspect_container(cid)["State"]["Pid"]
        assert Path(f"/proc/{pid}").exists() and d._leftover_pids()  # conmon runs, named by the service's root
    finally:
        c.close()
        d.stop()
    assert d.proc is not None and d.proc.poll() is not None
    assert not Path(f"/proc/{pid}").exists()
    assert d._leftover_pids() == [] and not d.root.exists() and _mounts_under(d.root) == []


def test_the_enforcement_canary_runs_on_docker_with_a_default_image(
    docker_env: DockerEnv, docker_host: str, tmp_path: Path
) -> None:
    """headroom's canary task names no image: docker.default_image gives it one, and its limits bite."""
    import yaml

    from orchestrator.store.sqlite import Store

    spec = {
        "tasks_dir": str(FIXTURES),
        "tasks": ["tests-hidden"],
        "backend": "docker",
        "attempts": 1,
        "configurations": ["1x-strict", "2x", "unbounded"],
        "docker": {"build": True, "default_image": docker_env.base_image},
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(spec))
    res = headroom(
        "sweep", "--experiment", str(tmp_path / "exp.yaml"), "--store", str(tmp_path / "r.db"), "--format", "none"
    )
    assert res.returncode == 0, res.stderr
    store = Store.open_existing(tmp_path / "r.db")
    canary = store.provenance(store.run().run_id).canary
    store.close()
    assert canary is not None and canary.status == "enforced", canary
    checked = {a.config: a.status for a in canary.arms}
    assert checked["1x-strict"] == "enforced" and checked["1x/2x"] == "enforced"
    above = next(a for a in canary.arms if a.config == "1x-strict").above
    assert "oom_kill counter" in (above.oom_evidence or "")  # the kernel's verdict, not an exit code
    # the spins' account comes back in the agent's self-report; the container's CPU quota bites
    # (or the host was too busy to tell, as in tests/engine/test_canary.py)
    (cpu,) = canary.cpu.values()
    assert cpu.cpu_share is not None and cpu.unlimited_cpu_share is not None, cpu
    assert cpu.limited is True or any("too busy" in n for n in cpu.notes), cpu
