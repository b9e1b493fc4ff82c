"""The local backend: each try a process tree in its own cgroup, on this machine."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

import psutil

from orchestrator.backends.base import Capabilities, CleanupReport
from orchestrator.backends.local import cgroups
from orchestrator.backends.local.process import Limits, kill_tree, run_step
from orchestrator.backends.threaded import ThreadedBackend
from orchestrator.processes import pid_alive
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch, StepLaunch
from orchestrator.trial_outputs import read_agent_result, read_reward

Enforcement = Literal["auto", "cgroup", "rlimit"]
#: Host variables a workload needs to behave like itself; everything else stays out.
_BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
_WORKROOT_PREFIX = "headroom-"


def host_facts() -> dict[str, Any]:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
    }


def _stale_workroots() -> list[Path]:
    """Work roots of headroom processes that no longer exist."""
    out = []
    for p in Path(tempfile.gettempdir()).glob(f"{_WORKROOT_PREFIX}*"):
        pid = p.name.removeprefix(_WORKROOT_PREFIX)
        if pid.isdigit() and not pid_alive(int(pid)):
            out.append(p)
    return out


class LocalBackend(ThreadedBackend):
    name = "local"

    def __init__(self, enforcement: Enforcement = "auto", run_name: str | None = None, keep_workdirs: bool = False) -> None:
        super().__init__()
        self.keep_workdirs = keep_workdirs
        self.fallback_reason: str | None = None
        self.driver: cgroups.CgroupDriver | None = None
        name = run_name or f"{_WORKROOT_PREFIX}{os.getpid()}"
        if enforcement in ("auto", "cgroup"):
            try:
                self.driver = cgroups.detect(name)
            except cgroups.CgroupUnavailable as exc:
                if enforcement == "cgroup":
                    raise
                self.fallback_reason = str(exc)
        else:
            self.fallback_reason = "rlimit enforcement requested"
        self.enforcement = self.driver.mechanism if self.driver else "rlimit"
        cg = self.driver is not None
        self.capabilities = Capabilities(
            memory_limit=True, memory_request=cg, cpu_quota=cg, cpu_request=cg, storage_limit=False,
            isolation="none", network_control=False, gpus=False,
            oom_signal=f"{self.enforcement} oom_kill counter" if cg else "none: rlimit gives no kernel OOM signal",
            notes=[] if cg else [f"no cgroup ({self.fallback_reason}): CPU is not limited, memory is capped by RLIMIT_DATA"],
        )
        self._active: dict[str, tuple[cgroups.TrialCgroup | None, set[int]]] = {}
        self._killed: set[str] = set()
        for stale in _stale_workroots():
            shutil.rmtree(stale, ignore_errors=True)
        self.workroot = Path(tempfile.gettempdir()) / name
        self.workroot.mkdir(parents=True, exist_ok=True)

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

    def cleanup(self, run_id: str | None = None) -> CleanupReport:
        """Work dirs and cgroups of headroom processes that died without cleaning up."""
        report = CleanupReport()
        for stale in _stale_workroots():
            shutil.rmtree(stale, ignore_errors=True)
            report.removed.append(str(stale))
        if self.driver is not None:
            report.removed.extend(self.driver.reap_stale())
        return report

    def facts(self) -> dict[str, Any]:
        f = host_facts()
        f["enforcement"] = self.enforcement
        f["capabilities"] = self.capabilities.model_dump(mode="json")
        if self.driver:
            f.update(self.driver.describe())
        else:
            f["cgroup_version"] = None
            f["enforcement_fallback_reason"] = self.fallback_reason
        return f

    def close(self) -> None:
        self.cancel_all()
        self.shutdown()
        if self.driver:
            self.driver.close()
        shutil.rmtree(self.workroot, ignore_errors=True)

    # -- one try -----------------------------------------------------------------------
    def _argv(self, step: StepLaunch, task_dir: Path) -> list[str]:
        if step.script is not None:
            return ["bash", str(task_dir / step.script)]
        assert step.shell is not None
        return ["bash", "-c", step.shell]

    def run(self, launch: Launch) -> TrialFacts:
        amounts = launch.amounts
        facts = TrialFacts(
            enforcement=self.enforcement,
            request_cpus=amounts.request_cpus,
            request_memory_bytes=amounts.request_memory_bytes,
            limit_cpus=amounts.limit_cpus,
            limit_memory_bytes=amounts.limit_memory_bytes,
            qos_class=amounts.qos_class,
        )
        task_dir = Path(launch.task.path)
        # mkdtemp's random suffix keeps names unique; the try's cgroup takes the same name.
        workdir = Path(tempfile.mkdtemp(prefix=f"{launch.name}-", dir=self.workroot))
        app, agent_logs = workdir / "app", workdir / "logs" / "agent"
        for d in (app, agent_logs, workdir / "home", workdir / "tmp"):
            d.mkdir(parents=True)
        base = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        paths = {
            "HOME": str(workdir / "home"),
            "TMPDIR": str(workdir / "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "HEADROOM_TASK_DIR": str(task_dir),
            "HEADROOM_WORKDIR": str(app),
            "HEADROOM_INSTRUCTION_FILE": str(task_dir / "instruction.md"),
        }
        secrets = {k: os.environ[k] for k in launch.agent.secret_env if k in os.environ}
        agent_env = {**base, **launch.agent.env, **paths, **secrets,
                     "HEADROOM_LOGS_DIR": str(agent_logs), "HEADROOM_AGENT_RESULT": str(agent_logs / "result.json")}
        cg = None
        pids: set[int] = set()
        started = time.monotonic()
        try:
            with self._lock:
                if launch.name in self._killed:
                    facts.setup_error = "cancelled before start"
                    return facts
            if self.driver:
                try:
                    cg = self.driver.create(workdir.name, amounts)
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

            limits = Limits(memory_bytes=amounts.limit_memory_bytes)
            agent, usage_a = run_step(
                "agent", self._argv(launch.agent, task_dir), env=agent_env, cwd=app, logs_dir=agent_logs,
                timeout_s=launch.agent.timeout_s, cgroup=cg, limits=limits, on_spawn=on_spawn,
            )
            facts.agent = agent
            facts.agent_result = read_agent_result(agent_logs / "result.json")
            usage_v: dict[str, float | int | None] = {}
            with self._lock:
                killed = launch.name in self._killed
            if not (agent.timed_out or agent.oom_kills or agent.spawn_error or killed):
                # Made only now, after every agent process is dead, and outside anything the agent
                # could write: a reward file here was written by the verifier and nobody else.
                verifier_logs = Path(tempfile.mkdtemp(prefix="verifier-", dir=workdir))
                verifier, usage_v = run_step(
                    "verifier", self._argv(launch.verifier, task_dir),
                    env={**base, **launch.verifier.env, **paths, "HEADROOM_LOGS_DIR": str(verifier_logs)},
                    cwd=app, logs_dir=verifier_logs, timeout_s=launch.verifier.timeout_s, cgroup=cg, limits=limits,
                    on_spawn=on_spawn,
                )
                facts.verifier = verifier
                facts.reward, facts.reward_error = read_reward(verifier_logs)
            if cg is not None:
                facts.peak_memory_bytes = cg.peak_memory_bytes()
                facts.cpu_time_s = cg.cpu_time_s()
                facts.extra["memory_events"] = cg.memory_events()
                facts.extra["cpu_throttling"] = cg.cpu_throttling()
            else:
                peaks = [u.get("peak_memory_bytes") for u in (usage_a, usage_v) if u.get("peak_memory_bytes")]
                facts.peak_memory_bytes = int(max(peaks)) if peaks else None
                facts.cpu_time_s = sum(float(u.get("cpu_time_s") or 0) for u in (usage_a, usage_v))
            return facts
        finally:
            with self._lock:
                self._active.pop(launch.name, None)
                self._killed.discard(launch.name)
            facts.duration_s = time.monotonic() - started
            if cg is not None:
                cg.remove()
            if not self.keep_workdirs:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                facts.extra["workdir"] = str(workdir)
