"""An external agent on Pods: the agent runs on this host (``orchestrator.agents.external``), and acts on the try's
pod only through the exec channel, served by :class:`~orchestrator.backends.kubernetes.exec_target.PodExec`.

One :class:`PodAgent` (a thread) per try, started when the backend first sees the pod running:

1. it waits, in one exec, until the runner's agent phase has started (``agent.ready``), and reads the
   environment's working dir;
2. it runs the agent's install step, if it has one (a Harbor installed agent's ``setup``), then the agent, on the
   host with ``HEADROOM_EXEC`` pointing at the try's channel, each under its own timeout (the runner holds the
   phase for both); every exec is recorded in the exec log. A failed install is ``infra_error(agent_setup_failed)``
   and the agent does not start;
3. it tells the runner the agent ended (``agent.done``); the runner ends the phase (every later exec is
   refused), sweeps the container and runs the verifier as for any agent.

The verdict still comes only from the runner's termination message (issue 19's rule): the host gives the
agent's own facts (exit code, timeout, duration, output tails) and its artifacts (stdout, stderr, logs
dir, exec log), never the reward. A backend that restarts (``adopt``) has no agent thread for the pod: the
runner's phase then times out, and the try records the timeout.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from orchestrator.agents.external import ExternalRun, HostStep, exec_paths, run_external, setup_step, tagged
from orchestrator.artifacts import artifacts_for, names
from orchestrator.backends.kubernetes.exec_target import DONE, READY, PodExec
from orchestrator.backends.kubernetes.pod import EXTERNAL_START_SLACK_S
from orchestrator.backends.kubernetes.signals import AGENT_CONTAINER
from orchestrator.contract import paths as cc
from orchestrator.contract.outputs import read_agent_result
from orchestrator.contract.sequence import failed_step
from orchestrator.kube.exec import exec_in_pod
from orchestrator.spec.evidence import AgentSetup, ExternalAgent
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.launch import Launch
from orchestrator.spec.outcome import InfraReason

_WAIT_READY = f'while [ ! -e {READY} ]; do sleep 1; done; printf "%s" "${{HR_WORKDIR:-$PWD}}"'


def exec_target(api_client: Any, namespace: str, pod: str, workdir: str) -> PodExec:
    """The try's exec channel target: its commands get the contract's variables as on the other backends (the
    paths from here, the task's and the contract's others from the pod's ``HR_AGENT_ENV``), never a secret."""
    return PodExec(api_client, namespace, pod, container=AGENT_CONTAINER, default_cwd=workdir, env=exec_paths(workdir))


class PodAgent:
    def __init__(self, api_client: Any, namespace: str, launch: Launch) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.launch = launch
        self.spool = Path(tempfile.mkdtemp(prefix="headroom-pod-agent-"))
        os.chmod(self.spool, 0o700)
        self.logs = self.spool / "logs"
        self.logs.mkdir(mode=0o700)
        self.facts: StepFacts | None = None
        self.setup: StepFacts | None = None  # the install step's facts, when it has one
        self.exec_log: bytes | None = None
        self.execs = 0
        self.problem: str | None = None  # why the agent did not run (the pod ended first, the channel failed)
        self._pid: int | None = None
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"pod-agent-{launch.name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _spawned(self, pid: int) -> None:
        self._pid = pid
        if self._stopping.is_set():
            self._kill()

    def _run(self) -> None:
        pod = self.launch.name
        setup = self.launch.agent_setup.timeout_s if self.launch.agent_setup is not None else 0.0
        try:
            r = exec_in_pod(
                self.api_client,
                self.namespace,
                pod,
                ["sh", "-c", _WAIT_READY],
                container=AGENT_CONTAINER,
                timeout=setup + EXTERNAL_START_SLACK_S + 60,
            )
        except Exception as exc:  # noqa: BLE001 -- the pod ended (setup failed) or the API refused
            self.problem = f"the runner's agent phase could not be reached: {type(exc).__name__}: {exc}"[:500]
            return
        if r.exit_code != 0 or self._stopping.is_set():
            self.problem = f"the runner's agent phase did not start (exit {r.exit_code}): {r.stderr.strip()[:300]}"
            return
        workdir = r.stdout.strip() or "/"
        target = exec_target(self.api_client, self.namespace, pod, workdir)
        how = self._steps(target, workdir)
        for _ in range(3):  # the runner waits for this word until its own deadline: try again on a lost connection
            try:
                done = exec_in_pod(
                    self.api_client,
                    self.namespace,
                    pod,
                    ["sh", "-c", f'printf "%s\\n" "$1" > {DONE}', "headroom-done", how],
                    container=AGENT_CONTAINER,
                    timeout=60,
                )
                if done.exit_code == 0:
                    return
            except Exception:  # noqa: BLE001,S112 -- retried; the runner's deadline ends the phase otherwise
                pass
            time.sleep(1)
        self.problem = "the runner was not told the agent ended: its phase ended at its own deadline"

    def _steps(self, target: Any, workdir: str) -> str:
        """The install step (if any), then the agent; the word the runner is told."""

        def host_step(step: HostStep | None = None) -> ExternalRun:
            return run_external(
                self.launch,
                target,
                host_dir=self.spool,
                logs_dir=self.logs,
                workdir_inside=workdir,
                task_dir_inside=cc.TASK_DIR,
                exec_env={},
                on_spawn=self._spawned,
                step=step,
            )

        step = setup_step(self.launch)
        if step is not None:
            setup = host_step(step)
            self.setup, self.exec_log, self.execs = setup.agent, tagged(setup.exec_log, step.name), setup.execs
            if failed_step(setup.agent) is not None or self._stopping.is_set():
                return "setup_failed"
        run = host_step()
        self.facts, self.exec_log = run.agent, (self.exec_log or b"") + run.exec_log
        self.execs += run.execs
        return (
            "timeout"
            if run.agent.timed_out
            else "spawn_error"
            if run.agent.spawn_error
            else f"exit {run.agent.exit_code if run.agent.exit_code is not None else -1}"
        )

    def _kill(self) -> None:
        if self._pid is not None:
            try:
                os.killpg(self._pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, timeout: float = 30.0) -> None:
        """The pod is done (or the try cancelled): end the agent process if it is still running, and wait."""
        self._stopping.set()
        if self.thread.is_alive():
            self._kill()
            self.thread.join(timeout)

    def merge(self, facts: TrialFacts) -> None:
        """The host's agent facts in the try's facts; the runner's measures of the phase (OOM kills in the
        container's cgroup) stay, and so does everything it said about the verifier and the reward."""
        runner = facts.agent
        facts.extra.external_agent = ExternalAgent(
            ran_on="host", execs=self.execs, problem=self.problem, runner_phase=runner.model_copy() if runner else None
        )
        if self.setup is not None:
            s = self.setup
            facts.extra.agent_setup = AgentSetup(
                exit_code=s.exit_code, duration_s=round(s.duration_s, 3), timed_out=s.timed_out
            )
            if (why := failed_step(s)) is not None:  # headroom's own facts of a host process: the harness's failure
                facts.infra_hint = InfraReason.AGENT_SETUP_FAILED
                facts.infra_detail = f"agent setup failed: {why}; {s.stderr_tail[-500:]}".strip()
                return
        if self.facts is None:
            if runner is not None:
                runner.spawn_error = runner.spawn_error or self.problem or "the external agent did not run"
            return
        host = self.facts.model_copy()
        if runner is not None:
            host.oom_kills, host.oom_evidence = runner.oom_kills, runner.oom_evidence
        facts.agent = host
        # $HEADROOM_AGENT_RESULT is a host file for an external agent (the pod's /logs/agent has none)
        facts.agent_result = read_agent_result(self.logs / "result.json") or facts.agent_result

    def keep_artifacts(self, launch: Launch) -> None:
        """The agent's own stdout and stderr, its host logs dir and the exec log, as the try's artifacts."""
        sink = artifacts_for(launch)
        for name, file in (
            ("agent_setup/stdout", "agent_setup.stdout"),
            ("agent_setup/stderr", "agent_setup.stderr"),
            (names.AGENT_STDOUT, "agent.stdout"),
            (names.AGENT_STDERR, "agent.stderr"),
        ):
            if (self.spool / file).is_file():
                sink.add_file(launch, name, self.spool / file)
        if self.logs.is_dir():
            sink.add_tree(launch, names.LOGS_PREFIX, self.logs)
        if self.exec_log is not None:
            sink.add_bytes(launch, names.EXEC_LOG, self.exec_log)

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.spool, ignore_errors=True)
