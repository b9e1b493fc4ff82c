"""The local backend's side of an external agent: the trial's sandbox as its exec channel's target,
and what a try leaves, kept as artifacts."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.agents.external import HostStep, agent_step, exec_env, run_external, setup_step, tagged
from orchestrator.artifacts import artifacts_for, names
from orchestrator.backends.local.environment import SandboxEnvironment
from orchestrator.backends.local.runner import LocalRunner
from orchestrator.errors import EnvironmentGone
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.launch import Launch

#: The runner's output files (``NN-step.stdout``) as artifact names; the sanitiser's are headroom's, not kept.
_STEP_FILE = re.compile(r"^\d+-(agent_setup|agent|verifier)\.(stdout|stderr)$")


def contract_agent(
    launch: Launch,
    runner: LocalRunner,
    *,
    base_env: Mapping[str, str],
    paths: Mapping[str, str],
    on_exec_log: Callable[[bytes], None],
) -> Callable[[Any], StepFacts]:
    """The external agent as the contract's host-side agent phase (``Plan.agent``). It does not use the
    contract's per-command exec: one sandbox for the whole phase (:class:`SandboxEnvironment`, in the trial's
    cgroup) keeps background processes between commands and gives each command's complete output."""
    return _contract_step(launch, runner, agent_step(launch), base_env=base_env, paths=paths, on_exec_log=on_exec_log)


def contract_setup(
    launch: Launch,
    runner: LocalRunner,
    *,
    base_env: Mapping[str, str],
    paths: Mapping[str, str],
    on_exec_log: Callable[[bytes], None],
) -> Callable[[Any], StepFacts] | None:
    """The external agent's install step as the contract's agent_setup phase (``Plan.setup``), in a sandbox of its
    own like the agent's (the trial's HOME, /tmp and work dir persist to the agent's); None: it has none."""
    step = setup_step(launch)
    if step is None:
        return None
    return _contract_step(
        launch,
        runner,
        step,
        base_env=base_env,
        paths=paths,
        on_exec_log=lambda log: on_exec_log(tagged(log, step.name)),
    )


def _contract_step(
    launch: Launch,
    runner: LocalRunner,
    step: HostStep,
    *,
    base_env: Mapping[str, str],
    paths: Mapping[str, str],
    on_exec_log: Callable[[bytes], None],
) -> Callable[[Any], StepFacts]:
    def agent(_exec: Any) -> StepFacts:
        cg = runner.cg
        oom_before = cg.oom_kills() if cg is not None else 0
        where = runner.paths
        env = {
            **base_env,
            **exec_env(launch, where["app"], task_dir=where["task"], logs_dir=where["agent_logs"]),
            **paths,
            **runner.dirs_env(),
        }
        environment = SandboxEnvironment(
            runner.sandboxed,
            env=env,
            cwd=runner.app,
            cgroup=cg,
            stderr_path=runner.out_dir / "environment.stderr",
            on_spawn=runner.on_spawn,
        )
        try:
            try:
                environment.wait_ready()
            except EnvironmentGone as exc:
                return StepFacts(name=step.name, spawn_error=f"the trial's environment could not start: {exc}")
            run = run_external(
                launch,
                environment,
                host_dir=runner.out_dir,
                logs_dir=runner.agent_logs,
                workdir_inside=runner.paths["app"],
                task_dir_inside=runner.paths["task"],
                exec_env={},
                on_spawn=runner.on_spawn,
                step=step,
            )
        finally:
            environment.stop()
        on_exec_log(run.exec_log)
        agent_facts = run.agent
        if cg is not None:
            agent_facts.oom_kills = cg.oom_kills() - oom_before
            if agent_facts.oom_kills:
                agent_facts.oom_evidence = f"{cg.version} oom_kill counter (the environment, in the {step.name} phase)"
        return agent_facts

    return agent


def keep_artifacts(launch: Launch, *, out_dir: Path, agent_logs: Path, exec_log: bytes | None) -> None:
    """The agent's logs dir, every step's complete output (the install phase's apart) and the exec log."""
    sink = artifacts_for(launch)
    for f in sorted(out_dir.iterdir()) if out_dir.is_dir() else []:
        m = _STEP_FILE.match(f.name)
        if m:
            sink.add_file(launch, f"{m.group(1)}/{m.group(2)}", f)
    for step in ("agent_setup", "agent"):  # an external agent's own output (its install step's apart)
        if (out_dir / f"{step}.stdout").is_file():
            sink.add_file(launch, f"{step}/stdout", out_dir / f"{step}.stdout")
            sink.add_file(launch, f"{step}/stderr", out_dir / f"{step}.stderr")
    sink.add_tree(launch, names.LOGS_PREFIX, agent_logs)
    if exec_log is not None:
        sink.add_bytes(launch, names.EXEC_LOG, exec_log)
