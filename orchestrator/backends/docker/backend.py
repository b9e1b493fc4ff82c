"""The Docker backend: each try one container, on one machine, through the Docker Engine API.

A try, in order (docs/docker-backend.md has the why of each step):

1. the image: the task's ``docker_image`` (``experiment.image`` overrides it), or
   one built from ``environment/Dockerfile`` when there is none or with ``--build``;
2. one container from it, labelled, kept alive by ``sleep infinity`` as PID 1, with
   the try's memory limit and reservation, CPU quota and shares, and no network
   unless the try may use the internet;
3. ``/logs/agent``, ``/logs/verifier`` and ``/headroom/task`` made; ``/solution``
   copied in for the oracle;
4. the agent step, by ``exec`` in the image's WORKDIR, under its timeout;
5. every process but PID 1 killed (checked with the API's process list) and, in the
   same ``exec``, ``/tests`` and ``/logs/verifier`` emptied;
6. the task's tests copied to ``/tests``, the verifier step run, the reward read from
   ``/logs/verifier/reward.*``;
7. counters read from the container's cgroup (OOM kills per step, peak memory,
   CPU time and throttling), the container stopped, ``State.OOMKilled`` read,
   and the container removed with its anonymous volumes.

OOM verdicts come from the kernel's ``oom_kill`` counter of the container's own
cgroup and from the runtime (``State.OOMKilled``, ``oom`` events), never from an
exit code. The backend does not decide outcomes; classify does.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from orchestrator import container_contract as cc
from orchestrator.backends.base import Capabilities, CleanupReport, Handle
from orchestrator.backends.local.backend import host_facts
from orchestrator.backends.local.cgroups import TrialCgroup, cpu_shares
from orchestrator.backends.threaded import ThreadedBackend
from orchestrator.errors import UserError
from orchestrator.launch import label_value
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.launch import Launch, StepLaunch
from orchestrator.spec.outcome import InfraReason
from orchestrator.tasks import agent_view
from orchestrator.trial_outputs import MAX_READ, parse_agent_result, parse_reward

from . import cgroup as cgroup_mod
from . import steps
from .images import ImageResolver, ImageUnavailable
from .labels import LAUNCH, MANAGED, OWNER, RUN, Owner

KEEP_ALIVE = ["sleep", "infinity"]
#: The verifier's HEADROOM_TASK_DIR: a fresh copy of the task's files with tests/ -> /tests (as the Pod runner has).
VERIFIER_TASK_DIR = "/headroom/run/vtask"
#: The image's WORKDIR when it sets none.
DEFAULT_WORKDIR = "/"
#: What of the task directory the agent sees under HEADROOM_TASK_DIR (solution/ for the oracle only; never tests/),
#: besides task.toml, which it gets without the grader's, verifier's and oracle's sections (tasks/agent_view.py).
AGENT_TASK_FILES = ("instruction.md", "environment")


def container_path(script: str) -> str:
    """A step's script, relative to the task directory, where the contract puts it in the container."""
    head, _, rest = script.partition("/")
    if head == "tests":
        return f"{cc.TESTS}/{rest}"
    if head == "solution":
        return f"{cc.SOLUTION}/{rest}"
    return f"{cc.TASK_DIR}/{script}"


def task_trees(task_dir: Path, target: str, *, solution: bool) -> list[tuple[Path, str]]:
    """(host path, container path) of the task files a step may see under ``target`` (task.toml: task_toml)."""
    names = [*AGENT_TASK_FILES, *(("solution",) if solution else ())]
    return [(task_dir / n, f"{target}/{n}") for n in names if (task_dir / n).exists()]


def task_toml(task_dir: Path, target: str) -> list[tuple[str, bytes, int]]:
    """The task's ``task.toml`` as a step sees it under ``target``."""
    src = task_dir / agent_view.TASK_TOML
    return [(f"{target}/{agent_view.TASK_TOML}", agent_view.delivered(agent_view.TASK_TOML, src.read_bytes()), 0o644)]


_API_ERRORS = (docker.errors.APIError, requests.exceptions.RequestException)


#: What a Podman daemon whose containers' cgroups cannot be read from here (another machine, a VM) cannot do.
PODMAN_OOM_NOTE = ("on Podman, OOM kills are seen only in the container's cgroup (its API reports neither 'oom' "
                   "events nor State.OOMKilled for a step's process): a try whose cgroup cannot be read from this "
                   "machine is an infra error, not a guess")


def engine_of(version: dict[str, Any]) -> str:
    """'podman' or 'docker': which engine serves the Engine API (Podman names itself among the components)."""
    names = " ".join(str(c.get("Name", "")) for c in version.get("Components") or [])
    return "podman" if "podman" in names.lower() else "docker"


def engine_version(version: dict[str, Any], engine: str) -> str | None:
    for c in version.get("Components") or []:
        if engine == "podman" and "podman" in str(c.get("Name", "")).lower():
            return c.get("Version")
    return version.get("Version")


class _Cancelled(Exception):
    pass


class _OomCounter:
    """The container's OOM kills so far: the cgroup's counter, else the daemon's ``oom`` events."""

    def __init__(self, api: docker.APIClient, container_id: str, cg: TrialCgroup | None, since: int) -> None:
        self.api, self.container_id, self.cg, self.since = api, container_id, cg, since
        self.evidence = (f"{cg.version} oom_kill counter of the container's cgroup" if cg is not None
                         else "docker 'oom' events of the container")

    def count(self) -> int:
        if self.cg is not None:
            return self.cg.oom_kills()
        # Events reach the daemon a moment after the kill: wait until one second past now.
        events = self.api.events(since=self.since, until=int(time.time()) + 1, decode=True,
                                 filters={"container": self.container_id, "event": "oom"})
        return sum(1 for _ in events)


class DockerBackend(ThreadedBackend):
    name = "docker"
    enforcement = "docker"

    def __init__(self, options: DockerOptions | None = None) -> None:
        self.options = options or DockerOptions()
        environment = dict(os.environ)
        if self.options.host:
            environment["DOCKER_HOST"] = self.options.host
        self.address = environment.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        try:
            # from_env also honours DOCKER_TLS_VERIFY / DOCKER_CERT_PATH for a remote daemon.
            self.client = docker.from_env(environment=environment, timeout=int(self.options.api_timeout_s),
                                          max_pool_size=64)
            # Steps stream output for as long as they run: their deadline is enforced here, not by a socket timeout.
            streaming = docker.from_env(environment=environment, timeout=None,  # type: ignore[arg-type]
                                        max_pool_size=64)
            self.stream_api = streaming.api
            self.info: dict[str, Any] = self.client.info()
            self.version: dict[str, Any] = self.client.version()
        except docker.errors.DockerException as exc:
            raise UserError(f"cannot reach the Docker daemon at {self.address} ({exc}); start it, or set DOCKER_HOST "
                            "or docker.host", field="--backend") from None
        super().__init__()
        self.api: docker.APIClient = self.client.api
        self.owner = Owner.me()
        self.engine = engine_of(self.version)
        self.images = ImageResolver(self.client, build=self.options.build, build_network=self.options.build_network,
                                    pull=self.options.pull, build_timeout_s=self.options.build_timeout_s,
                                    default_image=self.options.default_image)
        self._cancel: dict[str, threading.Event] = {}
        self.capabilities = Capabilities(
            memory_limit=True, memory_request=True, cpu_quota=True, cpu_request=True, storage_limit=False,
            isolation="container", network_control=True, gpus=False,
            oom_signal=("container cgroup oom_kill counter (Podman reports no OOM kill of a step's process through "
                        "its API, so the cgroup must be readable from here)" if self.engine == "podman" else
                        "container cgroup oom_kill counter (else docker 'oom' events) and State.OOMKilled"),
            notes=[
                "storage is recorded, not enforced (a per-container disk quota needs overlay2 on xfs with pquota)",
                "the agent and the verifier share one container, as in Harbor: the verifier sees what the agent left "
                "outside /tests and /logs/verifier",
                *([PODMAN_OOM_NOTE] if self.engine == "podman" else []),
            ],
        )

    # -- lifecycle -------------------------------------------------------------------------
    def _containers(self, label: str) -> list[dict[str, Any]]:
        return self.api.containers(all=True, filters={"label": [f"{MANAGED}=true", label]})

    def _remove(self, container_id: str) -> None:
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass

    def kill(self, name: str) -> None:
        with self._lock:
            ev = self._cancel.setdefault(name, threading.Event())
        ev.set()
        try:
            for c in self._containers(f"{LAUNCH}={name}"):
                self._remove(c["Id"])
        except _API_ERRORS:
            pass

    def adopt(self, launch: Launch) -> Handle | None:
        """A try whose CLI died cannot be adopted (its steps were driven from that process): remove its
        container, so it stops using the machine, and let the engine run the try again."""
        for c in self._containers(f"{LAUNCH}={launch.name}"):
            owner = Owner.parse(c.get("Labels", {}).get(OWNER, ""))
            if owner is None or owner.alive() is not True or owner == self.owner:
                self._remove(c["Id"])
        return None

    def cleanup(self, run_id: str | None = None) -> CleanupReport:
        """Containers (and their anonymous volumes) whose headroom process is gone."""
        report = CleanupReport()
        label = f"{RUN}={label_value(run_id)}" if run_id else f"{MANAGED}=true"
        for c in self._containers(label):
            labels = c.get("Labels") or {}
            what = f"container {c['Names'][0].lstrip('/') if c.get('Names') else c['Id'][:12]} ({c['Id'][:12]})"
            owner = Owner.parse(labels.get(OWNER, ""))
            alive = owner.alive() if owner else False
            if owner is not None and alive:
                report.kept.append(f"{what}: its headroom process {owner.pid} is still running")
                continue
            if owner is not None and alive is None and run_id is None:
                report.kept.append(f"{what}: started on host {owner.host}; name its run with --run-id to remove it")
                continue
            self._remove(c["Id"])
            report.removed.append(what)
        for v in self.api.volumes(filters={"label": f"{MANAGED}=true"}).get("Volumes") or []:
            try:
                self.api.remove_volume(v["Name"])
                report.removed.append(f"volume {v['Name']}")
            except docker.errors.APIError as exc:
                report.kept.append(f"volume {v['Name']}: {exc.explanation or exc}")
        return report

    def facts(self) -> dict[str, Any]:
        info, version = self.info, self.version
        return {
            "hostname": info.get("Name"),
            "kernel": info.get("KernelVersion"),
            "os": info.get("OperatingSystem"),
            "cpu_count": info.get("NCPU"),
            "memory_bytes": info.get("MemTotal"),
            "enforcement": self.enforcement,
            "capabilities": self.capabilities.model_dump(mode="json"),
            "cgroup_version": f"cgroup-v{info.get('CgroupVersion', '1')}",
            "docker": {
                "engine": self.engine,
                "engine_version": engine_version(self.version, self.engine),
                "address": self.address,
                "server_version": version.get("Version"),
                "api_version": version.get("ApiVersion"),
                "components": [c.get("Name") + " " + c.get("Version", "") for c in version.get("Components") or []],
                "cgroup_driver": info.get("CgroupDriver"),
                "storage_driver": info.get("Driver"),
                "default_runtime": info.get("DefaultRuntime"),
                "security_options": info.get("SecurityOptions"),
                "sdk": docker.__version__,
                "options": self.options.model_dump(mode="json"),
            },
            "orchestrator_host": host_facts(),
        }

    def close(self) -> None:
        with self._lock:
            names = list(self._futures)
        for n in names:
            self.kill(n)
        self.shutdown()
        try:  # whatever this process still owns (a crash inside run) goes too
            for c in self._containers(f"{OWNER}={self.owner.label}"):
                if not self.options.keep_containers:
                    self._remove(c["Id"])
        except _API_ERRORS:
            pass
        self.client.close()
        self.stream_api.close()

    # -- one try -----------------------------------------------------------------------------
    def _argv(self, step: StepLaunch) -> list[str]:
        if step.script is not None:
            return ["bash", container_path(step.script)]
        assert step.shell is not None
        return ["bash", "-c", step.shell]

    def _host_config(self, launch: Launch) -> dict[str, Any]:
        a = launch.amounts
        period = self.options.cpu_period_us
        cfg: dict[str, Any] = {
            "mem_reservation": a.request_memory_bytes,
            "cpu_shares": cpu_shares(a.request_cpus),
            "network_mode": self.options.network if launch.allow_internet else "none",
        }
        if a.limit_memory_bytes is not None:
            # No swap past the limit, as the kubelet and the local backend run trials.
            cfg.update(mem_limit=a.limit_memory_bytes, memswap_limit=a.limit_memory_bytes)
        if a.limit_cpus is not None:
            cfg.update(cpu_period=period, cpu_quota=max(1000, int(a.limit_cpus * period)))
        if cfg["network_mode"] is None:
            del cfg["network_mode"]
        return cfg

    def _create(self, launch: Launch, image_id: str) -> str:
        labels = {**launch.labels, MANAGED: "true", OWNER: self.owner.label, LAUNCH: launch.name,
                  "headroom.dev/spec": launch.spec_digest[:16]}
        kwargs = dict(image=image_id, entrypoint=KEEP_ALIVE, command=[], name=launch.name, labels=labels,
                      host_config=self.api.create_host_config(**self._host_config(launch)), detach=True)
        try:
            return self.api.create_container(**kwargs)["Id"]
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
        # A container of this name is left from a process that died: it is not this try's.
        self._remove(launch.name)
        return self.api.create_container(**kwargs)["Id"]

    def run(self, launch: Launch) -> TrialFacts:
        a = launch.amounts
        facts = TrialFacts(enforcement=self.enforcement, request_cpus=a.request_cpus,
                           request_memory_bytes=a.request_memory_bytes, limit_cpus=a.limit_cpus,
                           limit_memory_bytes=a.limit_memory_bytes, qos_class=a.qos_class)
        with self._lock:
            cancelled = self._cancel.setdefault(launch.name, threading.Event())
        started = time.monotonic()
        cid: str | None = None
        try:
            if launch.verifier is None:  # refused before any run (check_capabilities); this guards direct callers
                facts.setup_error = "a golden task without tests/: the docker backend needs tests/test.sh"
                return facts
            if launch.gpus:
                facts.setup_error = f"the task needs {launch.gpus} GPU(s); the docker backend gives none"
                return facts
            try:
                image = self.images.resolve(launch.task)
            except ImageUnavailable as exc:
                facts.infra_hint, facts.infra_detail = InfraReason.IMAGE_PULL, str(exc)[:4000]
                return facts
            facts.extra["image"] = image.provenance()
            if cancelled.is_set():
                raise _Cancelled
            try:
                cid = self._create(launch, image.id)
                self.api.start(cid)
            except docker.errors.APIError as exc:
                facts.infra_hint = InfraReason.CONTAINER_CONFIG
                facts.infra_detail = f"cannot start the container: {exc.explanation or exc}"
                return facts
            self._run_in(cid, launch, image.workdir or DEFAULT_WORKDIR, facts, cancelled)
            return facts
        except _Cancelled:
            facts.setup_error = "cancelled"
            return facts
        except _API_ERRORS as exc:
            if cancelled.is_set():
                facts.setup_error = "cancelled"
            elif cid is not None and (st := self._stopped(cid)) is not None:
                # PID 1 died under us: an OOM kill of the keep-alive is an OOM (see _finish), anything else is not ours.
                facts.infra_detail = f"the container stopped during the try (exit {st.get('ExitCode')}): {exc}"
                if not st.get("OOMKilled"):
                    facts.infra_hint = InfraReason.OTHER
            else:
                facts.infra_hint = InfraReason.API_ERROR
                facts.infra_detail = f"docker: {getattr(exc, 'explanation', None) or exc}"
            return facts
        finally:
            if cid is not None:
                self._finish(cid, facts, cancelled)
            facts.duration_s = time.monotonic() - started
            with self._lock:
                self._cancel.pop(launch.name, None)

    def _run_in(self, cid: str, launch: Launch, workdir: str, facts: TrialFacts, cancelled: threading.Event) -> None:
        api = self.api
        state = api.inspect_container(cid)["State"]
        cg = cgroup_mod.locate(int(state.get("Pid") or 0), cid)
        ooms = _OomCounter(api, cid, cg, since=int(time.time()) - 2)
        facts.extra["cgroup"] = cg.version if cg is not None else None
        if cg is None and self.engine == "podman":
            # Nothing would tell an OOM kill of a step from a failure: refuse rather than misclassify.
            facts.infra_hint, facts.infra_detail = InfraReason.OTHER, PODMAN_OOM_NOTE
            return
        task_dir = Path(launch.task.path)
        oracle = launch.task.include_solution
        trees = task_trees(task_dir, cc.TASK_DIR, solution=oracle)
        if oracle and (task_dir / "solution").is_dir():
            trees.append((task_dir / "solution", cc.SOLUTION))
        steps.put_archive(api, cid, steps.tree_archive(
            dirs=[(cc.LOGS, 0o755), (cc.AGENT_LOGS, 0o777), (cc.VERIFIER_LOGS, 0o777), ("/headroom", 0o755),
                  (cc.TASK_DIR, 0o755)],
            trees=trees, files=task_toml(task_dir, cc.TASK_DIR),
        ))
        secrets = {k: os.environ[k] for k in launch.agent.secret_env if k in os.environ}
        agent_env = {**launch.agent.env, **cc.step_paths("agent", workdir), **secrets}
        if cancelled.is_set():
            raise _Cancelled
        before = ooms.count()
        agent = steps.run_step(api, self.stream_api, cid, "agent", self._argv(launch.agent), env=agent_env,
                               workdir=workdir, timeout_s=launch.agent.timeout_s, cancelled=cancelled)
        facts.agent = agent
        if cancelled.is_set():
            raise _Cancelled
        # Nothing of the agent may run on while the verifier does, or write after it; and whatever
        # it put where the tests, the verifier's task copy and the reward go is not theirs.
        survivors, not_cleared = steps.kill_all(
            api, cid, then=f"rm -rf {cc.TESTS} {cc.VERIFIER_LOGS} {VERIFIER_TASK_DIR}")
        agent.oom_kills, before = self._ooms_since(ooms, before)
        if agent.oom_kills:
            agent.oom_evidence = ooms.evidence
        raw, _why = steps.read_small(api, cid, cc.AGENT_RESULT, MAX_READ)
        facts.agent_result = parse_agent_result(raw.decode("utf-8", "replace")) if raw else {}
        if survivors:
            facts.infra_hint = InfraReason.OTHER
            facts.infra_detail = f"{survivors} agent process(es) survived being killed; the verifier was not run"
        elif not_cleared is not None:
            facts.verifier = StepFacts(name="verifier", spawn_error=f"cannot clear {cc.TESTS}: {not_cleared}")
        elif not (agent.timed_out or agent.oom_kills or agent.spawn_error):
            verifier = self._verify(cid, launch, workdir, facts, cancelled)
            verifier.oom_kills, before = self._ooms_since(ooms, before)
            if verifier.oom_kills:
                verifier.oom_evidence = ooms.evidence
        self._usage(cid, cg, facts)

    @staticmethod
    def _ooms_since(ooms: _OomCounter, before: int) -> tuple[int, int]:
        now = ooms.count()
        return max(0, now - before), now

    def _verify(self, cid: str, launch: Launch, workdir: str, facts: TrialFacts,
                cancelled: threading.Event) -> StepFacts:
        api = self.api
        task_dir = Path(launch.task.path)
        steps.put_archive(api, cid, steps.tree_archive(
            dirs=[(cc.VERIFIER_LOGS, 0o777), (VERIFIER_TASK_DIR, 0o755)],
            trees=[(task_dir / "tests", cc.TESTS),
                   *task_trees(task_dir, VERIFIER_TASK_DIR, solution=launch.task.include_solution)],
            files=task_toml(task_dir, VERIFIER_TASK_DIR),
            links=[(f"{VERIFIER_TASK_DIR}/tests", cc.TESTS)],
        ))
        if cancelled.is_set():
            raise _Cancelled
        env = {**launch.verifier.env, **cc.step_paths("verifier", workdir, task_dir=VERIFIER_TASK_DIR)}
        verifier = facts.verifier = steps.run_step(
            api, self.stream_api, cid, "verifier", self._argv(launch.verifier), env=env, workdir=workdir,
            timeout_s=launch.verifier.timeout_s, cancelled=cancelled)
        if cancelled.is_set():
            raise _Cancelled
        facts.reward, facts.reward_error = None, "missing: no reward.txt or reward.json"
        for name in cc.REWARD_FILES:
            raw, why = steps.read_small(api, cid, f"{cc.VERIFIER_LOGS}/{name}", MAX_READ)
            if why is not None:
                facts.reward, facts.reward_error = None, f"malformed: {name} is {why}"
                break
            if raw is not None:
                facts.reward, facts.reward_error = parse_reward(name, raw.decode("utf-8", "replace"))
                break
        return verifier

    def _usage(self, cid: str, cg: TrialCgroup | None, facts: TrialFacts) -> None:
        if cg is not None:
            facts.peak_memory_bytes = cg.peak_memory_bytes()
            facts.cpu_time_s = cg.cpu_time_s()
            facts.extra["memory_events"] = cg.memory_events()
            facts.extra["cpu_throttling"] = cg.cpu_throttling()
            return
        stats = steps.stats_once(self.api, cid)
        mem, cpu = stats.get("memory_stats") or {}, stats.get("cpu_stats") or {}
        facts.peak_memory_bytes = mem.get("max_usage")  # cgroup v1 daemons only; v2 gives no peak here
        total = (cpu.get("cpu_usage") or {}).get("total_usage")
        facts.cpu_time_s = total / 1e9 if total is not None else None
        facts.extra["cpu_throttling"] = cpu.get("throttling_data") or {}
        facts.extra["usage_source"] = "docker stats endpoint"

    def _stopped(self, cid: str) -> dict[str, Any] | None:
        try:
            state = self.api.inspect_container(cid)["State"]
        except _API_ERRORS:
            return None
        return None if state.get("Running") else state

    def _finish(self, cid: str, facts: TrialFacts, cancelled: threading.Event) -> None:
        """Stop the container, take the runtime's OOM verdict, remove it."""
        try:
            try:
                self.api.kill(cid)
                self.api.wait(cid, timeout=30)
            except _API_ERRORS:
                pass  # already stopped (PID 1 died) or gone (cancelled): the state still tells
            state = self.api.inspect_container(cid)["State"]
            facts.extra["container_state"] = {k: state.get(k) for k in ("OOMKilled", "ExitCode", "Error")}
            if state.get("OOMKilled") and not cancelled.is_set():
                steps_run = [s for s in (facts.verifier, facts.agent) if s is not None]
                if steps_run and not any(s.oom_kills for s in steps_run):
                    # The runtime saw a kill the counter did not (it cannot tell which step): the last step ran.
                    steps_run[0].oom_kills = 1
                    steps_run[0].oom_evidence = "container State.OOMKilled"
                elif steps_run:
                    hit = next(s for s in steps_run if s.oom_kills)
                    hit.oom_evidence = f"{hit.oom_evidence} and container State.OOMKilled"
        except _API_ERRORS:
            pass
        finally:
            if not self.options.keep_containers:
                try:
                    self._remove(cid)
                except _API_ERRORS:
                    pass
