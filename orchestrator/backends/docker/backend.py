"""The Docker backend: each try one container, on one machine, through the Docker Engine API.

A try, in order (docs/docker-backend.md has the why of each step):

1. the image: the task's ``docker_image`` (``experiment.image`` overrides it), or
   one built from ``environment/Dockerfile`` when there is none or with ``--build``;
2. one volume per carried output (:mod:`orchestrator.contract.carry`: the work dir, filled
   from the image's, ``/logs/agent`` and the task's declared ``[verifier] outputs``);
3. the agent's container from the image, labelled, kept alive by ``sleep infinity`` as
   PID 1, with the volumes, the try's memory limit and reservation, CPU quota and shares,
   and no network unless the try may use the internet; ``/logs/agent`` and
   ``/headroom/task`` made, ``/solution`` copied in for the oracle. While the agent runs,
   the verifier's container is created from the same image with the same volumes (not
   filled again from the image) and limits, and the hand-over put in it;
4. the agent step, by ``exec`` in the work dir, under its timeout;
5. the agent's container stopped through the API (counters read first): the kernel kills
   every process in it, whatever the agent changed inside. It is never started again;
6. the rest of the contract's phases (:mod:`orchestrator.contract.sequence`, through
   :class:`.runner.DockerRunner`) in the verifier's container, started now from the
   pristine image, so nothing the agent installed in the system runs there: only the
   carried volumes hold what the agent made. ``/logs/verifier``, ``/tests`` and the
   verifier's task copy uploaded, the sanitiser run over the carried outputs, the
   verifier run in its environment, the reward read from ``/logs/verifier/reward.*``;
7. counters read again (each container has its own cgroup; the usage is combined), the
   verifier's container stopped, ``State.OOMKilled`` read (after each run), both
   containers removed, then the volumes.

OOM verdicts come from the kernel's ``oom_kill`` counter of the container's own
cgroup and from the runtime (``State.OOMKilled``, ``oom`` events), never from an
exit code. The backend does not decide outcomes; classify does.
"""

from __future__ import annotations

import os
import secrets as token
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from orchestrator.backends.base import CleanupReport, Handle, refuse_force
from orchestrator.backends.local.backend import host_facts
from orchestrator.backends.threaded import ThreadedBackend
from orchestrator.contract import agent_check, carry, sanitiser
from orchestrator.contract import paths as cc
from orchestrator.contract.phases import Phase
from orchestrator.contract.sequence import Command, Plan, SetupCommand, run_try
from orchestrator.errors import EngineBlind, ImageUnavailable, TryCancelled, UserError, VerifierLost
from orchestrator.isolation.cgroups import TrialCgroup, cpu_shares
from orchestrator.spec.backend import BackendAbilities, BackendFacts, DockerFacts, HostFacts
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.evidence import ContainerState, CpuThrottling, MemoryEvents
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.launch import Launch, StepLaunch, environment_network
from orchestrator.spec.names import label_value
from orchestrator.spec.outcome import InfraReason
from orchestrator.tasks import agent_view
from orchestrator.tasks.needs import normalize_arch

from . import cgroup as cgroup_mod
from . import external as docker_external
from . import image_links, steps
from .images import ImageResolver
from .labels import LAUNCH, MANAGED, OWNER, RUN, Owner
from .runner import DockerRunner, handover_archive

KEEP_ALIVE = ["sleep", "infinity"]
#: The verifier's keep-alive: ``sleep`` found on the system's own PATH, never on an image PATH that may name a
#: carried folder (``ENV PATH=/app/bin:...``), where the agent could have planted one.
VERIFIER_KEEP_ALIVE = ["/bin/sh", "-c", f"PATH={sanitiser.PATH} exec sleep infinity"]
#: The verifier's HEADROOM_TASK_DIR: a fresh copy of the task's files with tests/ -> /tests (as the Pod runner has).
VERIFIER_TASK_DIR = "/headroom/run/vtask"
#: where the sanitiser writes a copy of its verdict, in the verifier's fresh container (Plan.verdict_dir)
VERDICT_DIR = "/headroom/run/sanitiser"
#: What the verifier's container gets or gives after the agent ran, besides the carried folders: none may pass a
#: link of the image (image_links.py).
VERIFIER_PATHS = (cc.TESTS, cc.VERIFIER_LOGS, VERIFIER_TASK_DIR, VERDICT_DIR, cc.SOLUTION)
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


def verifier_task_copy(task_dir: Path, dest: Path, *, oracle: bool) -> Path:
    """The verifier's ``HEADROOM_TASK_DIR`` as a host tree: what the agent saw, with ``tests/`` linked to ``/tests``."""
    dest.mkdir(parents=True)
    for src, target in task_trees(task_dir, "", solution=oracle):
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / target.lstrip("/"))
    for path, data, _mode in task_toml(task_dir, ""):
        (dest / path.lstrip("/")).write_bytes(data)
    (dest / "tests").symlink_to(cc.TESTS)
    return dest


def task_toml(task_dir: Path, target: str) -> list[tuple[str, bytes, int]]:
    """The task's ``task.toml`` as a step sees it under ``target``."""
    src = task_dir / agent_view.TASK_TOML
    return [(f"{target}/{agent_view.TASK_TOML}", agent_view.delivered(agent_view.TASK_TOML, src.read_bytes()), 0o644)]


_API_ERRORS = (docker.errors.APIError, requests.exceptions.RequestException)


#: What a Podman daemon whose containers' cgroups cannot be read from here (another machine, a VM) cannot do.
PODMAN_OOM_NOTE = (
    "on Podman, OOM kills are seen only in the container's cgroup (its API reports neither 'oom' "
    "events nor State.OOMKilled for a step's process): a try whose cgroup cannot be read from this "
    "machine is an infra error, not a guess"
)


def engine_of(version: dict[str, Any]) -> str:
    """'podman' or 'docker': which engine serves the Engine API (Podman names itself among the components)."""
    names = " ".join(str(c.get("Name", "")) for c in version.get("Components") or [])
    return "podman" if "podman" in names.lower() else "docker"


def engine_version(version: dict[str, Any], engine: str) -> str | None:
    for c in version.get("Components") or []:
        if engine == "podman" and "podman" in str(c.get("Name", "")).lower():
            return c.get("Version")
    return version.get("Version")


class _OomCounter:
    """The container's OOM kills so far: the cgroup's counter, else the daemon's ``oom`` events."""

    def __init__(self, api: docker.APIClient, container_id: str, cg: TrialCgroup | None, since: int) -> None:
        self.api, self.container_id, self.cg, self.since = api, container_id, cg, since
        self.evidence = (
            f"{cg.version} oom_kill counter of the container's cgroup"
            if cg is not None
            else "docker 'oom' events of the container"
        )

    def count(self) -> int:
        if self.cg is not None:
            return self.cg.oom_kills()
        # Events reach the daemon a moment after the kill: wait until one second past now.
        events = self.api.events(
            since=self.since,
            until=int(time.time()) + 1,
            decode=True,
            filters={"container": self.container_id, "event": "oom"},
        )
        return sum(1 for _ in events)


#: Counters that are flags, not counts: across the container's two runs the larger value is kept.
_FLAGS = ("oom_kill_disable", "under_oom")


def merge_usage(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The container's usage over its runs: each (re)start gives it a fresh cgroup, so peaks are the
    largest of the runs', CPU time and event counters their sums."""
    peaks = [p["peak"] for p in parts if p.get("peak") is not None]
    cpus = [p["cpu"] for p in parts if p.get("cpu") is not None]
    out: dict[str, Any] = {"peak": max(peaks) if peaks else None, "cpu": sum(cpus) if cpus else None}
    for key in ("memory_events", "cpu_throttling"):
        if any(key in p for p in parts):
            merged: dict[str, int] = {}
            for p in parts:
                for k, v in (p.get(key) or {}).items():
                    merged[k] = max(merged.get(k, 0), v) if k in _FLAGS else merged.get(k, 0) + v
            out[key] = merged
    if any("usage_source" in p for p in parts):
        out["usage_source"] = "docker stats endpoint"
    return out


class _Container:
    """One try's containers over its runs: the agent's, then (once the agent's is stopped) the verifier's.

    Stopping the agent's through the API is how the agent's processes end: the runtime kills PID 1
    and the kernel every other process of its PID namespace, whatever the agent changed inside.
    The verifier's is another container from the same image, sharing only the carried volumes;
    it is created while the agent runs (:meth:`prepare_verifier`) and started by :meth:`to_verifier`, never
    before the agent's is stopped: nothing of the verifier's runs beside the agent.
    Each run has its own cgroup, so the counters are read before each stop. ``cid`` is the
    container of the current run.
    """

    def __init__(self, backend: DockerBackend, cid: str, mounts: dict[str, str]) -> None:
        self.backend, self.api, self.cid = backend, backend.api, cid
        #: carried folder -> its volume, mounted in both containers
        self.agent_cid, self.mounts = cid, mounts
        self.verifier_cid: str | None = None
        #: (source, path) put into the verifier's container before it started
        self.preloaded: set[tuple[Path | None, str]] = set()
        self._verifier: threading.Thread | None = None
        self._verifier_error: BaseException | None = None
        self.since = int(time.time()) - 2
        self.parts: list[dict[str, Any]] = []
        self.running = True
        self.state: dict[str, Any] | None = None
        self.runs, self.judged = 1, 0  # runs started; runs whose final state gave its OOM verdict
        #: the try's host-side files: every step's complete output, an external agent's logs dir
        self.spool = Path(tempfile.mkdtemp(prefix="headroom-docker-try-"))
        self.exec_log: bytes | None = None
        self._locate()

    def _locate(self) -> None:
        state = self.api.inspect_container(self.cid)["State"]
        self.cg = cgroup_mod.locate(int(state.get("Pid") or 0), self.cid)
        self.ooms = _OomCounter(self.api, self.cid, self.cg, since=self.since)
        self._frozen = self.mark = 0  # each step starts with step_ooms(), which sets the mark

    def oom_count(self) -> int:
        return self.ooms.count() if self.running else self._frozen

    def step_ooms(self) -> int:
        """OOM kills since the last call (or the start of this run)."""
        now = self.oom_count()
        new, self.mark = max(0, now - self.mark), now
        return new

    def halt(self) -> None:
        """Read this run's counters, then stop the container (SIGKILL to PID 1; the kernel kills the rest)
        and keep its final state. Nothing happens if it is stopped already."""
        if not self.running:
            return
        self.running = False
        try:
            self._frozen = self.ooms.count()
            self.parts.append(self.backend._snapshot(self.cid, self.cg))
        except (*_API_ERRORS, OSError):
            pass
        try:
            self.api.kill(self.cid)
        except _API_ERRORS:
            pass  # already stopped (PID 1 died) or gone (cancelled): the state still tells
        try:
            self.api.wait(self.cid, timeout=30)
            self.state = self.api.inspect_container(self.cid)["State"]
        except _API_ERRORS:
            self.state = None

    def prepare_verifier(self, create: Any, handover: list[tuple[Path | None, str]]) -> None:
        """Create the verifier's container in the background (``create()`` returns its id), while the agent runs,
        and put the hand-over in it: nothing but headroom ever writes there, so it is still as put when the
        verifier starts. A failed upload is left for the hand-over phase to do again."""

        def make() -> None:
            try:
                self.verifier_cid = create()
            except BaseException as exc:  # noqa: BLE001 -- raised again where the container is needed
                self._verifier_error = exc
                return
            try:
                steps.put_archive(self.api, self.verifier_cid, handover_archive(handover))
                self.preloaded = set(handover)
            except (*_API_ERRORS, RuntimeError, OSError):
                pass

        self._verifier = threading.Thread(target=make, name="verifier-create", daemon=True)
        self._verifier.start()

    def verifier_created(self, timeout: float | None = None) -> str | None:
        if self._verifier is not None:
            self._verifier.join(timeout)
        return self.verifier_cid

    def to_verifier(self) -> None:
        """Start the verifier's container (the agent's is stopped): the next runs are there."""
        self.verifier_created()
        if self._verifier_error is not None:
            raise self._verifier_error
        assert self.verifier_cid is not None
        self.api.start(self.verifier_cid)
        self.cid = self.verifier_cid
        self.running = True
        self.runs += 1
        self._locate()


class DockerBackend(ThreadedBackend):
    name = "docker"
    #: an instance adds what its daemon says (its architecture, Podman's OOM signal).
    #: External agents act on the container through ``exec`` (:mod:`.external`).
    abilities = BackendAbilities(
        enforcement="docker",
        memory_limit=True,
        memory_request=True,
        cpu_quota=True,
        cpu_request=True,
        storage_limit=False,
        oom_signal="container cgroup oom_kill counter (else docker 'oom' events) and State.OOMKilled",
        isolation="container",
        network_control=True,
        task_images=True,
        verifier_outputs=True,
        exec_channel=True,
        flags=frozenset({"--build"}),
        notes=[
            "storage is recorded, not enforced (a per-container disk quota needs overlay2 on xfs with pquota)",
            "the verifier runs in a fresh container from the task's image: of the agent's it sees only the carried "
            "outputs (the work dir, /logs/agent, the task's [verifier] outputs)",
        ],
    )

    def __init__(self, options: DockerOptions | None = None) -> None:
        self.options = options or DockerOptions()
        environment = dict(os.environ)
        if self.options.host:
            environment["DOCKER_HOST"] = self.options.host
        self.address = environment.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        try:
            # from_env also honours DOCKER_TLS_VERIFY / DOCKER_CERT_PATH for a remote daemon.
            self.client = docker.from_env(
                environment=environment, timeout=int(self.options.api_timeout_s), max_pool_size=64
            )
            # Steps stream output for as long as they run: their deadline is enforced here, not by a socket timeout.
            streaming = docker.from_env(environment=environment, timeout=None, max_pool_size=64)
            self.stream_api = streaming.api
            self.info: dict[str, Any] = self.client.info()
            self.version: dict[str, Any] = self.client.version()
        except docker.errors.DockerException as exc:
            raise UserError(
                f"cannot reach the Docker daemon at {self.address} ({exc}); start it, or set DOCKER_HOST "
                "or docker.host",
                field="--backend",
            ) from None
        super().__init__()
        self.api: docker.APIClient = self.client.api
        self.owner = Owner.me()
        self.engine = engine_of(self.version)
        self.images = ImageResolver(
            self.client,
            build=self.options.build,
            build_network=self.options.build_network,
            pull=self.options.pull,
            build_timeout_s=self.options.build_timeout_s,
            default_image=self.options.default_image,
        )
        self._cancel: dict[str, threading.Event] = {}
        #: (image id, paths) -> why the image cannot be trusted with them (image_links.py), or None
        self._links_checked: dict[tuple[str, tuple[str, ...]], str | None] = {}
        podman = self.engine == "podman"
        self.abilities = self.abilities.model_copy(
            update={
                "architectures": [normalize_arch(str(self.version["Arch"]))] if self.version.get("Arch") else [],
                **(
                    {
                        "oom_signal": "container cgroup oom_kill counter (Podman reports no OOM kill of a step's "
                        "process through its API, so the cgroup must be readable from here)",
                        "notes": [*self.abilities.notes, PODMAN_OOM_NOTE],
                    }
                    if podman
                    else {}
                ),
            }
        )

    # -- lifecycle -------------------------------------------------------------------------
    def _containers(self, label: str) -> list[dict[str, Any]]:
        return self.api.containers(all=True, filters={"label": [f"{MANAGED}=true", label]})

    def _remove(self, container_id: str) -> None:
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass

    def _remove_volume(self, name: str) -> None:
        try:
            self.api.remove_volume(name, force=True)
        except docker.errors.NotFound:
            pass

    def _volumes(self, label: str) -> list[dict[str, Any]]:
        return self.api.volumes(filters={"label": [f"{MANAGED}=true", label]}).get("Volumes") or []

    def _remove_launch(self, name: str) -> None:
        """A try's containers, then its volumes (a volume in use cannot go)."""
        for c in self._containers(f"{LAUNCH}={name}"):
            self._remove(c["Id"])
        for v in self._volumes(f"{LAUNCH}={name}"):
            self._remove_volume(v["Name"])

    def kill(self, name: str) -> None:
        with self._lock:
            ev = self._cancel.setdefault(name, threading.Event())
        ev.set()
        try:
            self._remove_launch(name)
        except _API_ERRORS:
            pass

    def adopt(self, launch: Launch) -> Handle | None:
        """A try whose CLI died cannot be adopted (its steps were driven from that process): remove its
        container, so it stops using the machine, and let the engine run the try again."""
        for c in [*self._containers(f"{LAUNCH}={launch.name}"), *self._volumes(f"{LAUNCH}={launch.name}")]:
            owner = Owner.parse((c.get("Labels") or {}).get(OWNER, ""))
            if owner is None or owner.alive() is not True or owner == self.owner:
                if "Id" in c:
                    self._remove(c["Id"])
                else:  # its containers went first (listed first)
                    self._remove_volume(c["Name"])
        return None

    def cleanup(self, run_id: str | None = None, *, force: bool = False) -> CleanupReport:
        """Containers (and their anonymous volumes) whose headroom process is gone."""
        refuse_force(self, force)
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
                report.kept.append(
                    f"{what}: started on host {owner.host}; name its run (runs cleanup RUN) to remove it"
                )
                continue
            self._remove(c["Id"])
            report.removed.append(what)
        for v in self._volumes(label):
            # a try's carried outputs (the agent's work dir, its logs): kept while their headroom runs
            owner = Owner.parse((v.get("Labels") or {}).get(OWNER, ""))
            alive = owner.alive() if owner else False
            if owner is not None and (alive or (alive is None and run_id is None)):
                report.kept.append(f"volume {v['Name']}: its headroom process {owner.pid} is still running or remote")
                continue
            try:
                self.api.remove_volume(v["Name"])
                report.removed.append(f"volume {v['Name']}")
            except docker.errors.APIError as exc:
                report.kept.append(f"volume {v['Name']}: {exc.explanation or exc}")
        return report

    def facts(self) -> BackendFacts:
        info, version = self.info, self.version
        return BackendFacts(
            name=self.name,
            abilities=self.abilities,
            host=HostFacts(
                hostname=info.get("Name"),
                kernel=info.get("KernelVersion"),
                os=info.get("OperatingSystem"),
                cpu_count=info.get("NCPU"),
                memory_bytes=info.get("MemTotal"),
                cgroup_version=f"cgroup-v{info.get('CgroupVersion', '1')}",
            ),
            docker=DockerFacts(
                engine=self.engine,
                engine_version=engine_version(self.version, self.engine),
                address=self.address,
                server_version=version.get("Version"),
                api_version=version.get("ApiVersion"),
                components=[c.get("Name") + " " + c.get("Version", "") for c in version.get("Components") or []],
                cgroup_driver=info.get("CgroupDriver"),
                storage_driver=info.get("Driver"),
                default_runtime=info.get("DefaultRuntime"),
                security_options=info.get("SecurityOptions"),
                sdk=docker.__version__,
                options=self.options.model_dump(mode="json"),
            ),
            orchestrator_host=host_facts(),
        )

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
            "network_mode": self.options.network if environment_network(launch) else "none",
        }
        if a.limit_memory_bytes is not None:
            # No swap past the limit, as the kubelet and the local backend run trials.
            cfg.update(mem_limit=a.limit_memory_bytes, memswap_limit=a.limit_memory_bytes)
        if a.limit_cpus is not None:
            cfg.update(cpu_period=period, cpu_quota=max(1000, int(a.limit_cpus * period)))
        if cfg["network_mode"] is None:
            del cfg["network_mode"]
        return cfg

    def _labels(self, launch: Launch) -> dict[str, str]:
        return {
            **launch.labels,
            MANAGED: "true",
            OWNER: self.owner.label,
            LAUNCH: launch.name,
            "headroom.dev/spec": launch.spec_digest[:16],
        }

    def _create_volumes(self, launch: Launch, paths: list[str]) -> dict[str, str]:
        """One fresh volume per carried path (path -> volume name); a random suffix, so nothing a dead
        process left under a name is ever reused."""
        out: dict[str, str] = {}
        for i, path in enumerate(paths):
            name = f"{launch.name}-{i}-{token.token_hex(4)}"
            self.api.create_volume(name=name, driver="local", labels=self._labels(launch))
            out[path] = name
        return out

    def _create(
        self,
        launch: Launch,
        image_id: str,
        volumes: dict[str, str],
        *,
        verifier: bool = False,
    ) -> str:
        name = f"{launch.name}-verifier" if verifier else launch.name
        # The agent's container fills each empty volume from the image (the work dir's files); the verifier's
        # never does: a folder the agent emptied stays empty.
        mounts = [docker.types.Mount(target=p, source=v, type="volume", no_copy=verifier) for p, v in volumes.items()]
        kwargs = dict(
            image=image_id,
            entrypoint=VERIFIER_KEEP_ALIVE if verifier else KEEP_ALIVE,
            command=[],
            name=name,
            labels={**self._labels(launch), "headroom.dev/role": "verifier" if verifier else "agent"},
            host_config=self.api.create_host_config(**self._host_config(launch), mounts=mounts),
            detach=True,
        )
        try:
            return self.api.create_container(**kwargs)["Id"]
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
        # A container of this name is left from a process that died: it is not this try's.
        self._remove(name)
        return self.api.create_container(**kwargs)["Id"]

    def run(self, launch: Launch) -> TrialFacts:
        a = launch.amounts
        facts = TrialFacts(
            enforcement=self.abilities.enforcement,
            request_cpus=a.request_cpus,
            request_memory_bytes=a.request_memory_bytes,
            limit_cpus=a.limit_cpus,
            limit_memory_bytes=a.limit_memory_bytes,
            qos_class=a.qos_class,
        )
        with self._lock:
            cancelled = self._cancel.setdefault(launch.name, threading.Event())
        started = time.monotonic()
        cid: str | None = None
        ctr: _Container | None = None
        volumes: dict[str, str] = {}
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
            facts.extra.image = image.provenance()
            work = carry.workdir(image.workdir)
            if (why := carry.problem(work)) is not None:
                facts.setup_error = f"the image's WORKDIR cannot be carried to the verifier: {why}"
                return facts
            task_toml_bytes = (Path(launch.task.path) / agent_view.TASK_TOML).read_bytes()
            carried = carry.roots(work, carry.declared(task_toml_bytes))
            if cancelled.is_set():
                raise TryCancelled
            try:
                why = image_links.volume_problem(image.volumes, carried) or self._linked(
                    launch, image.id, [*carried, *VERIFIER_PATHS, *image.volumes]
                )
                if why is not None:
                    facts.setup_error = why
                    return facts
                volumes = self._create_volumes(launch, carried)
                cid = self._create(launch, image.id, volumes)
                self.api.start(cid)
            except docker.errors.APIError as exc:
                facts.infra_hint = InfraReason.CONTAINER_CONFIG
                facts.infra_detail = f"cannot start the container: {exc.explanation or exc}"
                return facts
            ctr = _Container(self, cid, volumes)
            self._run_in(
                ctr,
                launch,
                work,
                carried,
                facts,
                cancelled,
                fresh_workdir=not image.workdir.strip("/"),
                make_verifier=lambda: self._create(launch, image.id, volumes, verifier=True),
            )
            return facts
        except TryCancelled:
            facts.setup_error = "cancelled"
            return facts
        except _API_ERRORS as exc:
            if cancelled.is_set():
                facts.setup_error = "cancelled"
            elif cid is not None and (ctr is None or ctr.running) and (st := self._stopped(ctr.cid if ctr else cid)):
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
                self._finish(cid, ctr, facts, cancelled)
            if ctr is not None:  # every process stopped, the volumes still there: the agent's logs dir is kept
                docker_external.keep_artifacts(
                    self.api,
                    ctr.agent_cid,
                    launch,
                    host_dir=ctr.spool,
                    exec_log=ctr.exec_log,
                    logs_volume=volumes.get(cc.AGENT_LOGS),
                )
                shutil.rmtree(ctr.spool, ignore_errors=True)
            if cid is not None:
                self._remove_try(cid, ctr)
            self._drop_volumes(volumes)
            facts.duration_s = time.monotonic() - started
            with self._lock:
                self._cancel.pop(launch.name, None)

    def _linked(self, launch: Launch, image_id: str, paths: list[str]) -> str | None:
        """:func:`.image_links.first_link` in a container of the image with nothing mounted, never started; once
        per image and paths."""
        key = (image_id, tuple(paths))
        with self._lock:
            if key in self._links_checked:
                return self._links_checked[key]
        cid = self.api.create_container(
            image=image_id,
            entrypoint=KEEP_ALIVE,
            command=[],
            labels={**self._labels(launch), "headroom.dev/role": "link-check"},
        )["Id"]
        try:
            why = image_links.first_link(self.api, cid, paths)
        finally:
            self.api.remove_container(cid, force=True, v=True)
        with self._lock:
            self._links_checked[key] = why
        return why

    def _drop_volumes(self, volumes: dict[str, str]) -> None:
        if self.options.keep_containers:
            return
        for name in volumes.values():
            try:
                self._remove_volume(name)
            except _API_ERRORS:
                pass  # still in use (a container that would not go): `headroom runs cleanup` removes it

    def _run_in(
        self,
        ctr: _Container,
        launch: Launch,
        workdir: str,
        carried: list[str],
        facts: TrialFacts,
        cancelled: threading.Event,
        *,
        fresh_workdir: bool,
        make_verifier: Any,
    ) -> None:
        facts.extra.cgroup = ctr.cg.version if ctr.cg is not None else None
        if ctr.cg is None and self.engine == "podman":
            # Nothing would tell an OOM kill of a step from a failure: refuse rather than misclassify.
            facts.infra_hint, facts.infra_detail = InfraReason.OTHER, PODMAN_OOM_NOTE
            return
        staging = Path(tempfile.mkdtemp(prefix="headroom-vtask-"))
        try:
            self._run_staged(
                ctr,
                launch,
                workdir,
                carried,
                facts,
                cancelled,
                staging,
                fresh_workdir=fresh_workdir,
                make_verifier=make_verifier,
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _run_staged(
        self,
        ctr: _Container,
        launch: Launch,
        workdir: str,
        carried: list[str],
        facts: TrialFacts,
        cancelled: threading.Event,
        staging: Path,
        *,
        fresh_workdir: bool,
        make_verifier: Any,
    ) -> None:
        api, cid = self.api, ctr.cid
        task_dir = Path(launch.task.path)
        oracle = launch.task.include_solution
        # The verifier's container is made, and the hand-over put in it, while the agent's is filled and runs.
        vtask = verifier_task_copy(task_dir, staging / "vtask", oracle=oracle)
        handover: list[tuple[Path | None, str]] = [
            (None, cc.VERIFIER_LOGS),
            (task_dir / "tests", cc.TESTS),
            (vtask, VERIFIER_TASK_DIR),
            (None, VERDICT_DIR),
        ]
        ctr.prepare_verifier(make_verifier, handover)
        trees = task_trees(task_dir, cc.TASK_DIR, solution=oracle)
        if oracle and (task_dir / "solution").is_dir():
            trees.append((task_dir / "solution", cc.SOLUTION))
        if launch.agent_dir:  # an installed agent, copied in
            trees.append((Path(launch.agent_dir), docker_external.AGENT_DIR))
        steps.put_archive(
            api,
            cid,
            steps.tree_archive(
                dirs=[
                    (cc.LOGS, 0o755),
                    (cc.AGENT_LOGS, 0o777),
                    ("/headroom", 0o755),
                    (cc.TASK_DIR, 0o755),
                    # the fallback work dir (the image sets none): writable by any USER, as /logs/agent
                    *([(workdir, 0o777)] if fresh_workdir else []),
                ],
                trees=trees,
                files=task_toml(task_dir, cc.TASK_DIR),
            ),
        )
        secrets = {k: os.environ[k] for k in launch.agent.secret_env if k in os.environ}
        agent_env = {**launch.agent.env, **cc.step_paths("agent", workdir), **secrets}
        if launch.agent_dir:
            agent_env["HEADROOM_AGENT_DIR"] = docker_external.AGENT_DIR
        if cancelled.is_set():
            raise TryCancelled
        forbidden = [cc.TESTS, cc.VERIFIER_LOGS, VERIFIER_TASK_DIR, *(() if oracle else (cc.SOLUTION,))]
        assert launch.verifier is not None  # refused in run() otherwise
        setup = launch.agent_setup
        plan = Plan(
            workdir=workdir,
            # a container's network is the try's for every exec: the setup phase gets no other
            setup=(
                SetupCommand(self._argv(setup), {**setup.env, **agent_env}, setup.timeout_s)
                if setup is not None
                else docker_external.contract_setup(self.api, self.stream_api, ctr, launch, workdir=workdir)
                if launch.agent_kind == "external"
                else None
            ),
            agent=(
                docker_external.contract_agent(self.api, self.stream_api, ctr, launch, workdir=workdir)
                if launch.agent_kind == "external"
                else Command(self._argv(launch.agent), agent_env, launch.agent.timeout_s)
            ),
            verifier=Command(
                self._argv(launch.verifier),
                {**launch.verifier.env, **cc.step_paths("verifier", workdir, task_dir=VERIFIER_TASK_DIR)},
                launch.verifier.timeout_s,
            ),
            handover=handover,
            hidden=forbidden,
            roots=carried,
            prune=["/headroom"],  # headroom's own: the agent's task view and the verifier's copy
            verdict_dir=VERDICT_DIR,
            agent_target=(
                agent_check.target(launch.agent.shell)
                if launch.agent_kind != "external" and launch.agent.shell
                else None
            ),
        )
        runner = DockerRunner(
            ctr,
            stream_api=self.stream_api,
            cancelled=cancelled,
            keep_alive=VERIFIER_KEEP_ALIVE,
            blind_check=lambda: (PODMAN_OOM_NOTE if ctr.cg is None and self.engine == "podman" else None),
            runtime_oom=self._runtime_oom,
        )
        handover_t = [time.monotonic()]

        def proceed(phase: Phase) -> bool:
            if phase is Phase.STOP:  # from the agent's end: stop, the verifier's start, tests in, sanitiser
                handover_t[0] = time.monotonic()
            elif phase is Phase.SANITISE:
                facts.extra.handover_s = round(time.monotonic() - handover_t[0], 3)
            return not cancelled.is_set()

        try:
            run_try(runner, plan, facts, proceed=proceed)
        except (EngineBlind, VerifierLost) as exc:
            facts.infra_hint, facts.infra_detail = InfraReason.OTHER, str(exc)
        if cancelled.is_set():
            raise TryCancelled

    @staticmethod
    def _runtime_oom(state: dict[str, Any], steps_run: list[StepFacts]) -> None:
        """The runtime's own verdict for the run that just stopped (``steps_run``: its steps, last first)."""
        if not state.get("OOMKilled") or not steps_run:
            return
        if not any(s.oom_kills for s in steps_run):
            # The runtime saw a kill the counter did not (it cannot tell which step): the last step ran.
            steps_run[0].oom_kills = 1
            steps_run[0].oom_evidence = "container State.OOMKilled"
        else:
            hit = next(s for s in steps_run if s.oom_kills)
            hit.oom_evidence = f"{hit.oom_evidence} and container State.OOMKilled"

    def _snapshot(self, cid: str, cg: TrialCgroup | None) -> dict[str, Any]:
        """This run's usage: from the container's cgroup, else from the daemon's stats endpoint."""
        if cg is not None:
            return {
                "peak": cg.peak_memory_bytes(),
                "cpu": cg.cpu_time_s(),
                "memory_events": cg.memory_events(),
                "cpu_throttling": cg.cpu_throttling(),
            }
        stats = steps.stats_once(self.api, cid)
        mem, cpu = stats.get("memory_stats") or {}, stats.get("cpu_stats") or {}
        total = (cpu.get("cpu_usage") or {}).get("total_usage")
        return {
            "peak": mem.get("max_usage"),  # cgroup v1 daemons only; v2 gives no peak here
            "cpu": total / 1e9 if total is not None else None,
            "cpu_throttling": cpu.get("throttling_data") or {},
            "usage_source": "docker stats endpoint",
        }

    @staticmethod
    def _usage(parts: list[dict[str, Any]], facts: TrialFacts) -> None:
        if not parts:
            return
        usage = merge_usage(parts)
        facts.peak_memory_bytes, facts.cpu_time_s = usage["peak"], usage["cpu"]
        if "memory_events" in usage:
            facts.extra.memory_events = MemoryEvents.model_validate(usage["memory_events"])
        if "cpu_throttling" in usage:
            facts.extra.cpu_throttling = CpuThrottling.model_validate(usage["cpu_throttling"])
        if "usage_source" in usage:
            facts.extra.usage_source = usage["usage_source"]

    def _stopped(self, cid: str) -> dict[str, Any] | None:
        try:
            state = self.api.inspect_container(cid)["State"]
        except _API_ERRORS:
            return None
        return None if state.get("Running") else state

    def _finish(self, cid: str, ctr: _Container | None, facts: TrialFacts, cancelled: threading.Event) -> None:
        """Stop the current container (reading its last run's counters first), take the runtime's OOM verdict."""
        try:
            if ctr is None:
                try:
                    self.api.kill(cid)
                except _API_ERRORS:
                    pass
            else:
                ctr.halt()
                self._usage(ctr.parts, facts)
                state = ctr.state
                if state is not None:
                    facts.extra.container_state = ContainerState(
                        OOMKilled=state.get("OOMKilled"), ExitCode=state.get("ExitCode"), Error=state.get("Error")
                    )
                    if ctr.judged < ctr.runs and not cancelled.is_set():
                        self._runtime_oom(state, [s for s in (facts.verifier, facts.agent) if s is not None])
        except _API_ERRORS:
            pass

    def _remove_try(self, cid: str, ctr: _Container | None) -> None:
        """Both containers (the volumes go after them); ``keep_containers`` leaves them stopped."""
        gone = [cid]
        if ctr is not None:
            if ctr.verifier_cid is None:  # still being created: wait, so it does not outlive the try
                ctr.verifier_created(self.options.api_timeout_s)
            gone += [c for c in (ctr.verifier_cid,) if c is not None]
        for c in gone:
            try:
                if self.options.keep_containers:
                    self.api.kill(c)
                else:
                    self._remove(c)
            except _API_ERRORS:
                pass
