"""The local backend: each try a process tree in its own cgroup and, per step, its own sandbox.

A trial's steps run in bubblewrap sandboxes (:mod:`.sandbox`) inside the trial's
cgroup (:mod:`.cgroups`), with its disk use watched (:mod:`.storage`). Where no
sandbox can be made, the backend says so loudly and records ``isolation: none``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal, cast

import psutil

from orchestrator.backends.base import CleanupReport, refuse_force
from orchestrator.backends.local import external as local_external
from orchestrator.backends.local import runner as runner_mod
from orchestrator.backends.local.runner import LocalRunner
from orchestrator.backends.threaded import ThreadedBackend
from orchestrator.contract import agent_check
from orchestrator.contract.phases import Phase
from orchestrator.contract.sequence import Command, Plan, SetupCommand, run_try
from orchestrator.errors import CgroupUnavailable, SandboxUnavailable
from orchestrator.isolation import cgroups, sandbox
from orchestrator.isolation.process import Limits, kill_tree
from orchestrator.isolation.removal import BackgroundRemoval, remove_tree
from orchestrator.isolation.storage import DiskWatcher
from orchestrator.processes import pid_alive
from orchestrator.spec.backend import BackendAbilities, BackendFacts, HostFacts, LocalFacts
from orchestrator.spec.evidence import CpuThrottling, MemoryEvents, PidsEvents
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch, StepLaunch, agent_step_network
from orchestrator.spec.outcome import InfraReason
from orchestrator.tasks import agent_view
from orchestrator.tasks.needs import host_arch

Enforcement = Literal["auto", "cgroup", "rlimit"]
IsolationChoice = Literal["auto", "sandbox", "none"]
#: Host variables a workload needs to behave like itself; everything else stays out.
_BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
_WORKROOT_PREFIX = "headroom-"


def host_facts() -> HostFacts:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return HostFacts(
        hostname=platform.node(),
        kernel=platform.release(),
        os=platform.platform(),
        cpu_model=cpu_model,
        cpu_count=os.cpu_count(),
        memory_bytes=psutil.virtual_memory().total,
        python=platform.python_version(),
    )


def _stale_workroots() -> list[Path]:
    """Work roots of headroom processes that no longer exist."""
    out = []
    for p in Path(tempfile.gettempdir()).glob(f"{_WORKROOT_PREFIX}*"):
        pid = p.name.removeprefix(_WORKROOT_PREFIX)
        if pid.isdigit() and not pid_alive(int(pid)):
            out.append(p)
    return out


def _reap_workroots(removed: list[str], kept: list[str]) -> None:
    """Remove dead headroom processes' work roots; each goes to ``removed`` only if it is really gone."""
    for stale in _stale_workroots():
        if remove_tree(stale):
            removed.append(str(stale))
        elif not any(k.startswith(f"{stale} ") for k in kept):
            kept.append(f"{stale} (could not be removed: something in it refuses deletion)")


def _make_dir(path: Path, owner: tuple[int, int] | None, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, *owner)
    return path


def _snapshot(src: Path, dst: Path, task: bool = True) -> None:
    """A read-only, world-readable copy of a task: the sandbox user can read it wherever the original lives."""
    tmp = dst.with_name(dst.name + f".partial-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    toml = tmp / agent_view.TASK_TOML
    if task and toml.is_file() and not toml.is_symlink():  # the grader's, verifier's and oracle's secrets stay outside
        toml.write_bytes(agent_view.delivered(agent_view.TASK_TOML, toml.read_bytes()))
    for root, _dirs, files in os.walk(tmp):
        os.chmod(root, 0o755)
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                mode = os.stat(p).st_mode & 0o777
                # a script its owner may run, anyone may run: the sandbox user is not its owner
                os.chmod(p, mode | 0o444 | (0o111 if mode & 0o100 else 0))
    os.replace(tmp, dst)


class LocalBackend(ThreadedBackend):
    name = "local"
    #: at best (a cgroup and a sandbox); an instance narrows it to what this host gives.
    #: External agents act on the trial's sandbox through the exec channel (:mod:`.external`).
    abilities = BackendAbilities(
        enforcement="cgroup-v2",
        memory_limit=True,
        memory_request=True,
        cpu_quota=True,
        cpu_request=True,
        storage_limit=True,
        isolation="namespaces",
        network_control=True,
        architectures=[host_arch()],
        verifier_outputs=True,
        skips_verifier=True,
        exec_channel=True,
        flags=frozenset({"--enforcement", "--run-on-host"}),
    )

    def __init__(
        self,
        enforcement: Enforcement = "auto",
        run_name: str | None = None,
        keep_workdirs: bool = False,
        isolation: IsolationChoice = "auto",
        pids_max: int = cgroups.TRIAL_PIDS_MAX,
    ) -> None:
        super().__init__()
        self.keep_workdirs = keep_workdirs
        self.fallback_reason: str | None = None
        self.isolation_fallback_reason: str | None = None
        self.driver: cgroups.CgroupDriver | None = None
        self.sandbox: sandbox.Sandbox | None = None
        self.pids_max = pids_max
        name = run_name or f"{_WORKROOT_PREFIX}{os.getpid()}"
        if enforcement in ("auto", "cgroup"):
            try:
                self.driver = cgroups.detect(name)
            except CgroupUnavailable as exc:
                if enforcement == "cgroup":
                    raise
                self.fallback_reason = str(exc)
        else:
            self.fallback_reason = "rlimit enforcement requested"
        if isolation in ("auto", "sandbox"):
            try:
                self.sandbox = sandbox.probe()
            except SandboxUnavailable as exc:
                if isolation == "sandbox":
                    if self.driver:
                        self.driver.close()
                    raise
                self.isolation_fallback_reason = str(exc)
        else:
            self.isolation_fallback_reason = "isolation 'none' requested"
        mechanism = self.driver.mechanism if self.driver else "rlimit"
        cg = self.driver is not None
        notes = (
            []
            if cg
            else [
                f"no cgroup ({self.fallback_reason}): CPU is not limited, memory is capped by RLIMIT_DATA "
                "and an exhausted cap cannot be told from the agent's own failure (no OOM verdicts)"
            ]
        )
        if self.sandbox is None:
            notes.append(
                f"NO ISOLATION ({self.isolation_fallback_reason}): agents run as this user with its view of "
                "the machine and can read or change the tests, the store and other trials"
            )
        elif self.sandbox.filter is None:
            notes.append(
                f"NO SECCOMP FILTER ({self.sandbox.filter_fallback_reason}): sandboxed steps can use the "
                "kernel keyring, i.e. read keys of the orchestrator's session and pass keys between trials"
            )
        self.abilities = self.abilities.model_copy(
            update={
                "enforcement": mechanism,
                "memory_request": cg,
                "cpu_quota": cg,
                "cpu_request": cg,
                "isolation": "namespaces" if self.sandbox else "none",
                "network_control": self.sandbox is not None,
                "oom_signal": f"{mechanism} oom_kill counter" if cg else "none: rlimit gives no kernel OOM signal",
                "notes": notes,
            }
        )
        self._active: dict[str, tuple[cgroups.TrialCgroup | None, set[int]]] = {}
        self._killed: set[str] = set()
        self._snapshots: dict[str, Path] = {}
        self._snapshot_lock = threading.Lock()
        #: finished trials' work dirs, removed off the trial's path (their artifacts are kept before)
        self.removal = BackgroundRemoval()
        #: what a crashed headroom left behind, removed as this one starts (``cleanup`` reports it),
        #: and what could not be removed (with why): only what is really gone is called removed
        self.reaped_at_start = list(self.driver.reaped) if self.driver else []
        self.kept_at_start: list[str] = list(self.driver.kept) if self.driver else []
        _reap_workroots(self.reaped_at_start, self.kept_at_start)
        self.workroot = Path(tempfile.gettempdir()) / name
        # Searchable but not listable: the sandbox user must reach its own binds, and nothing more.
        _make_dir(self.workroot, None, 0o711)

    # -- lifecycle -------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """Kill one running try: its result is abandoned, not recorded."""
        with self._lock:
            self._killed.add(name)
            cg, pids = self._active.get(name, (None, set()))
            pids = set(pids)
        for pid in pids:
            kill_tree(pid, cg)
            kill_tree(pid, None)  # also the session, for a wrapper not yet inside its cgroup

    def cancel_all(self) -> None:
        with self._lock:
            names = list(self._active)
        for n in names:
            self.kill(n)

    def cleanup(self, run_id: str | None = None, *, force: bool = False) -> CleanupReport:
        """Work dirs and cgroups of headroom processes that died without cleaning up."""
        refuse_force(self, force)
        report = CleanupReport(removed=list(self.reaped_at_start), kept=list(self.kept_at_start))
        self.reaped_at_start, self.kept_at_start = [], []
        _reap_workroots(report.removed, report.kept)
        if self.driver is not None:
            report.removed.extend(self.driver.reap_stale(report.kept))
        return report

    def facts(self) -> BackendFacts:
        cgroup = dict(self.driver.describe()) if self.driver else {}
        version = cgroup.pop("cgroup_version", None)  # the host's; the rest are this run's parents
        return BackendFacts(
            name=self.name,
            abilities=self.abilities,
            host=host_facts().model_copy(update={"cgroup_version": version}),
            local=LocalFacts(
                sandbox=self.sandbox.describe()
                if self.sandbox
                else {"tool": None, "fallback_reason": self.isolation_fallback_reason},
                cgroup=cgroup,
                trial_pids_max=self.pids_max if self.driver else None,
                enforcement_fallback_reason=None if self.driver else self.fallback_reason,
            ),
        )

    def close(self) -> None:
        self.cancel_all()
        self.shutdown()
        self.removal.close()
        if self.driver:
            self.driver.close()
        remove_tree(self.workroot)

    # -- one try -----------------------------------------------------------------------
    def _task_copy(self, launch: Launch) -> Path:
        """The task's files as the sandbox sees them: one read-only snapshot per task and digest, per run."""
        key = f"{launch.task.digest[:16]}"
        with self._snapshot_lock:
            if key not in self._snapshots:
                dst = _make_dir(self.workroot / "tasks", None, 0o711) / key
                if not dst.exists():
                    _snapshot(Path(launch.task.path), dst)
                self._snapshots[key] = dst
            return self._snapshots[key]

    def _agent_copy(self, agent_dir: str) -> Path:
        """An installed agent's directory as the sandbox sees it: one read-only, world-readable copy per run
        (the sandbox user cannot reach a directory only headroom's user can)."""
        key = "agent-" + hashlib.sha256(agent_dir.encode()).hexdigest()[:16]
        with self._snapshot_lock:
            if key not in self._snapshots:
                dst = _make_dir(self.workroot / "agents", None, 0o711) / key
                if not dst.exists():
                    _snapshot(Path(agent_dir), dst, task=False)
                self._snapshots[key] = dst
            return self._snapshots[key]

    @staticmethod
    def _command(step: StepLaunch, task_dir: str) -> list[str]:
        if step.script is not None:
            return ["bash", f"{task_dir}/{step.script}"]
        assert step.shell is not None
        return ["bash", "-c", step.shell]

    def run(self, launch: Launch) -> TrialFacts:
        amounts = launch.amounts
        facts = TrialFacts(
            enforcement=self.abilities.enforcement,
            request_cpus=amounts.request_cpus,
            request_memory_bytes=amounts.request_memory_bytes,
            limit_cpus=amounts.limit_cpus,
            limit_memory_bytes=amounts.limit_memory_bytes,
            qos_class=amounts.qos_class,
        )
        facts.extra.isolation = self.abilities.isolation
        box = self.sandbox
        owner = (box.uid, box.gid) if box and os.geteuid() == 0 else None
        # mkdtemp's random suffix keeps names unique; the try's cgroup takes the same name.
        workdir = Path(tempfile.mkdtemp(prefix=f"{launch.name}-", dir=self.workroot))
        os.chmod(workdir, 0o711)
        app = _make_dir(workdir / "app", owner)
        agent_logs = _make_dir(workdir / "logs" / "agent", owner)
        task_host = self._task_copy(launch) if box else Path(launch.task.path)
        base = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        secrets = {k: os.environ[k] for k in launch.agent.secret_env if k in os.environ}

        cg = None
        pids: set[int] = set()
        started = time.monotonic()
        watcher: DiskWatcher | None = None
        env_runner: LocalRunner | None = None
        try:
            with self._lock:
                if launch.name in self._killed:
                    facts.setup_error = "cancelled before start"
                    return facts
            if self.driver:
                try:
                    cg = self.driver.create(workdir.name, amounts, pids_max=self.pids_max)
                except OSError as exc:
                    facts.setup_error = f"cannot create trial cgroup: {exc}"
                    return facts
            with self._lock:
                self._active[launch.name] = (cg, pids)

            def on_spawn(pid: int) -> None:
                pids.add(pid)
                with self._lock:
                    killed = launch.name in self._killed
                if killed:  # kill() may have run before this pid was known
                    kill_tree(pid, cg)

            def over_disk_limit(used: int) -> None:
                for pid in list(pids):
                    kill_tree(pid, cg)

            env_runner = LocalRunner(
                box=box,
                workdir=workdir,
                app=app,
                agent_logs=agent_logs,
                task_host=task_host,
                include_solution=launch.task.include_solution,
                network=launch.allow_internet,
                owner=owner,
                cgroup=cg,
                limits=Limits(memory_bytes=amounts.limit_memory_bytes),
                on_spawn=on_spawn,
                pids=pids,
                base_env=base,
                agent_network=agent_step_network(launch),
                agent_dir=(self._agent_copy(launch.agent_dir) if box else Path(launch.agent_dir))
                if launch.agent_dir
                else None,
            )
            where = env_runner.paths
            paths = {
                "PYTHONDONTWRITEBYTECODE": "1",
                "HEADROOM_TASK_DIR": where["task"],
                "HEADROOM_WORKDIR": where["app"],
                "HEADROOM_INSTRUCTION_FILE": f"{where['task']}/instruction.md",
            }
            hidden = [where["tests"], where["verifier_logs"]]
            if not launch.task.include_solution:
                hidden.append(where["solution"])
            setup = launch.agent_setup
            exec_logs: list[bytes] = []
            agent_dir_env = (
                {"HEADROOM_AGENT_DIR": runner_mod.AGENT_DIR if box else str(launch.agent_dir)}
                if launch.agent_dir
                else {}
            )
            plan = Plan(
                workdir=where["app"],
                setup=(
                    SetupCommand(
                        self._command(setup, where["task"]),
                        {**setup.env, **paths, **secrets, "HEADROOM_LOGS_DIR": where["agent_logs"], **agent_dir_env},
                        setup.timeout_s,
                        network=setup.network,
                    )
                    if setup is not None
                    else local_external.contract_setup(
                        launch, env_runner, base_env=base, paths=paths, on_exec_log=exec_logs.append
                    )
                    if launch.agent_kind == "external"
                    else None
                ),
                agent=(
                    local_external.contract_agent(
                        launch, env_runner, base_env=base, paths=paths, on_exec_log=exec_logs.append
                    )
                    if launch.agent_kind == "external"
                    else Command(
                        self._command(launch.agent, where["task"]),
                        {
                            **launch.agent.env,
                            **paths,
                            **secrets,
                            "HEADROOM_LOGS_DIR": where["agent_logs"],
                            "HEADROOM_AGENT_RESULT": f"{where['agent_logs']}/result.json",
                            **agent_dir_env,
                        },
                        launch.agent.timeout_s,
                    )
                ),
                verifier=(
                    Command(
                        self._command(launch.verifier, where["task"]),
                        {**launch.verifier.env, **paths, "HEADROOM_LOGS_DIR": where["verifier_logs"]},
                        launch.verifier.timeout_s,
                    )
                    if launch.verifier is not None
                    else None
                ),
                handover=[(None, where["verifier_logs"]), (task_host / sandbox.TESTS_DIR, where["tests"])],
                hidden=hidden,
                roots=[where["app"], where["agent_logs"]],
                # read-only in the sandbox: nothing of the agent's is there to judge, and listing them is slow
                prune=[d for d in (*sandbox.SYSTEM_DIRS, where["task"]) if d not in (where["app"],)],
                agent_result=f"{where['agent_logs']}/result.json",
                agent_target=(
                    agent_check.target(launch.agent.shell)
                    if launch.agent_kind != "external" and launch.agent.shell
                    else None
                ),
                verifier_logs=where["verifier_logs"],
            )
            watcher = (
                DiskWatcher([workdir], launch.limit_storage_bytes, over_disk_limit)
                if launch.limit_storage_bytes is not None
                else None
            )
            if watcher:
                watcher.__enter__()

            def proceed(phase: Phase) -> bool:
                with self._lock:
                    killed = launch.name in self._killed
                return not (killed or (watcher.check() if watcher else False))

            try:
                run_try(env_runner, plan, facts, proceed=proceed)
                if watcher:
                    watcher.check()
            finally:
                if watcher:
                    watcher.__exit__(None, None, None)
            local_external.keep_artifacts(
                launch,
                out_dir=env_runner.out_dir,
                agent_logs=agent_logs,
                exec_log=b"".join(exec_logs) if exec_logs else None,
            )
            if watcher:
                facts.extra.storage_peak_bytes = watcher.peak_bytes
                facts.extra.storage_peak_inodes = watcher.peak_inodes
                facts.extra.storage_inode_ceiling = watcher.limit_inodes
                if watcher.exceeded is not None:
                    facts.infra_hint = InfraReason.STORAGE_LIMIT
                    facts.infra_detail = watcher.detail()
            if cg is not None:
                facts.peak_memory_bytes = cg.peak_memory_bytes()
                facts.cpu_time_s = cg.cpu_time_s()
                facts.extra.memory_events = MemoryEvents.model_validate(cg.memory_events())
                facts.extra.cpu_throttling = CpuThrottling.model_validate(cg.cpu_throttling())
                facts.extra.pids_events = PidsEvents.model_validate(cg.pids_events())
            else:
                used = env_runner.usage if env_runner else []
                peaks = cast("list[float]", [u.get("peak_memory_bytes") for u in used if u.get("peak_memory_bytes")])
                facts.peak_memory_bytes = int(max(peaks)) if peaks else None
                facts.cpu_time_s = sum(float(u.get("cpu_time_s") or 0) for u in used)
            return facts
        finally:
            with self._lock:
                self._active.pop(launch.name, None)
                self._killed.discard(launch.name)
            facts.duration_s = time.monotonic() - started
            if cg is not None:
                cg.remove()
            if not self.keep_workdirs:
                self.removal.submit(workdir)
            else:
                facts.extra.workdir = str(workdir)
