"""The local backend: each trial a process tree in its own cgroup, on this machine."""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

import psutil

from orchestrator.backends.local import cgroups
from orchestrator.backends.local.process import Limits, kill_tree, run_step
from orchestrator.plan import Trial
from orchestrator.processes import pid_alive
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.resources import scale
from orchestrator.spec.task import Task

Enforcement = Literal["auto", "cgroup", "rlimit"]
#: Host variables a workload needs to behave like itself; everything else stays out.
_BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


def read_reward(logs_dir: Path) -> tuple[float | None, str | None]:
    """Harbor-style reward: ``reward.txt`` holds a number; ``reward.json`` a number or {"reward": x}."""
    txt, js = logs_dir / "reward.txt", logs_dir / "reward.json"
    try:
        if txt.is_file():
            return float(txt.read_text().strip()), None
        if js.is_file():
            data = json.loads(js.read_text())
            value = data.get("reward") if isinstance(data, dict) else data
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None, "malformed: reward.json has no numeric 'reward'"
            return float(value), None
    except (ValueError, json.JSONDecodeError) as exc:
        return None, f"malformed: {exc}"
    return None, "missing: no reward.txt or reward.json"


def read_agent_result(path: Path) -> dict[str, Any]:
    """Optional tokens and cost an agent reports in ``$HEADROOM_AGENT_RESULT``."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    keep = ("tokens_in", "tokens_out", "cost_usd", "model")
    return {k: data[k] for k in keep if k in data and isinstance(data[k], (int, float, str))}


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


class LocalBackend:
    def __init__(self, enforcement: Enforcement = "auto", run_name: str | None = None, keep_workdirs: bool = False) -> None:
        self.keep_workdirs = keep_workdirs
        self.fallback_reason: str | None = None
        self.driver: cgroups.CgroupDriver | None = None
        name = run_name or f"headroom-{os.getpid()}"
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
        self._lock = threading.Lock()
        self._active: dict[str, tuple[cgroups.TrialCgroup | None, set[int]]] = {}
        self._cancelled = threading.Event()
        for stale in Path(tempfile.gettempdir()).glob("headroom-*"):
            pid = stale.name.removeprefix("headroom-")
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        self.workroot = Path(tempfile.gettempdir()) / name
        self.workroot.mkdir(parents=True, exist_ok=True)

    def cancel(self) -> None:
        """Kill every running trial (Ctrl-C): their tries are abandoned, not recorded as results."""
        self._cancelled.set()
        with self._lock:
            active = list(self._active.values())
        for cg, pids in active:
            for pid in list(pids):
                kill_tree(pid, cg)
                kill_tree(pid, None)  # also the session, for a wrapper not yet inside its cgroup

    def facts(self) -> dict[str, Any]:
        f = host_facts()
        f["enforcement"] = self.enforcement
        if self.driver:
            f.update(self.driver.describe())
        else:
            f["cgroup_version"] = None
            f["enforcement_fallback_reason"] = self.fallback_reason
        return f

    def close(self) -> None:
        if self.driver:
            self.driver.close()
        shutil.rmtree(self.workroot, ignore_errors=True)

    def _agent_argv(self, task: Task, experiment: Experiment) -> list[str]:
        if experiment.agent.kind == "oracle":
            return ["bash", str(Path(task.path) / "solution" / "solve.sh")]
        assert experiment.agent.command
        return ["bash", "-c", experiment.agent.command]

    def run_trial(self, trial: Trial, task: Task, experiment: Experiment) -> TrialFacts:
        env_spec = task.spec.environment
        amounts = scale(env_spec.cpus, env_spec.memory_mb, trial.config)
        facts = TrialFacts(
            enforcement=self.enforcement,
            request_cpus=amounts.request_cpus,
            request_memory_bytes=amounts.request_memory_bytes,
            limit_cpus=amounts.limit_cpus,
            limit_memory_bytes=amounts.limit_memory_bytes,
            qos_class=amounts.qos_class,
        )
        safe = "".join(ch if ch.isalnum() else "-" for ch in trial.trial_id)
        # mkdtemp's random suffix makes the name unique even when two trial ids differ
        # only in punctuation; the trial's cgroup takes the same name.
        workdir = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=self.workroot))
        app, agent_logs = workdir / "app", workdir / "logs" / "agent"
        for d in (app, agent_logs, workdir / "home", workdir / "tmp"):
            d.mkdir(parents=True)
        env = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        env.update(
            HOME=str(workdir / "home"),
            TMPDIR=str(workdir / "tmp"),
            PYTHONDONTWRITEBYTECODE="1",
            HEADROOM_TASK_ID=task.id,
            HEADROOM_TASK_DIR=task.path,
            HEADROOM_TRIAL_ID=trial.trial_id,
            HEADROOM_ATTEMPT=str(trial.attempt),
            HEADROOM_SEED=str(trial.seed),
            HEADROOM_CONFIG=trial.config.label,
            HEADROOM_WORKDIR=str(app),
            HEADROOM_INSTRUCTION=task.instruction,
            HEADROOM_INSTRUCTION_FILE=str(Path(task.path) / "instruction.md"),
        )
        agent_env = {**env, **{k: os.environ[k] for k in experiment.agent.env_passthrough if k in os.environ},
                     "HEADROOM_LOGS_DIR": str(agent_logs), "HEADROOM_AGENT_RESULT": str(agent_logs / "result.json")}
        cg = None
        pids: set[int] = set()
        started = time.monotonic()
        try:
            if self._cancelled.is_set():
                facts.setup_error = "cancelled before start"
                return facts
            if self.driver:
                try:
                    cg = self.driver.create(workdir.name, amounts)
                except OSError as exc:
                    facts.setup_error = f"cannot create trial cgroup: {exc}"
                    return facts
            with self._lock:
                self._active[trial.trial_id] = (cg, pids)

            def on_spawn(pid: int) -> None:
                pids.add(pid)
                if self._cancelled.is_set():  # cancel() may have run before this pid was known
                    kill_tree(pid, cg)

            limits = Limits(memory_bytes=amounts.limit_memory_bytes)
            tm = experiment.timeout_multiplier
            agent, usage_a = run_step(
                "agent", self._agent_argv(task, experiment), env=agent_env, cwd=app, logs_dir=agent_logs,
                timeout_s=task.spec.agent.timeout_sec * tm, cgroup=cg, limits=limits, on_spawn=on_spawn,
            )
            facts.agent = agent
            facts.agent_result = read_agent_result(agent_logs / "result.json")
            usage_v: dict[str, float | int | None] = {}
            if not (agent.timed_out or agent.oom_kills or agent.spawn_error or self._cancelled.is_set()):
                # Made only now, after every agent process is dead, and outside anything the agent
                # could write: a reward file here was written by the verifier and nobody else.
                verifier_logs = Path(tempfile.mkdtemp(prefix="verifier-", dir=workdir))
                verifier, usage_v = run_step(
                    "verifier", ["bash", str(Path(task.path) / "tests" / "test.sh")],
                    env={**env, "HEADROOM_LOGS_DIR": str(verifier_logs)}, cwd=app, logs_dir=verifier_logs,
                    timeout_s=task.spec.verifier.timeout_sec * tm, cgroup=cg, limits=limits, on_spawn=on_spawn,
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
                self._active.pop(trial.trial_id, None)
            facts.duration_s = time.monotonic() - started
            if cg is not None:
                cg.remove()
            if not self.keep_workdirs:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                facts.extra["workdir"] = str(workdir)
