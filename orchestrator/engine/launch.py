"""Build the :class:`~orchestrator.spec.launch.Launch` of one try, and name it.

Names are DNS-1123 labels (lower-case alphanumerics and '-', at most 63
characters), derived only from the run id, the trial id and the try number, so
the same try always has the same name: a backend can make ``submit`` idempotent
on it, and a resumed run or a restarted controller finds what it started. The
naming rules live in :mod:`orchestrator.spec.names`, below the backends that read them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from orchestrator.agents import harbor
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.launch import HostAgent, HostLimits, Launch, SetupLaunch, StepLaunch, TaskSource
from orchestrator.spec.names import label_value, launch_name
from orchestrator.spec.resources import MIB, ResourceAmounts, band_amounts, scale
from orchestrator.spec.task import Task
from orchestrator.spec.trial import Trial
from orchestrator.tasks.needs import declared_architecture

#: The environment contract every backend gives both steps (paths are added by the backend).
CONTRACT = (
    "HEADROOM_TASK_ID",
    "HEADROOM_TRIAL_ID",
    "HEADROOM_ATTEMPT",
    "HEADROOM_TRY",
    "HEADROOM_SEED",
    "HEADROOM_CONFIG",
    "HEADROOM_INSTRUCTION",
)
#: Added by each backend, pointing at its own locations.
CONTRACT_PATHS = (
    "HEADROOM_WORKDIR",
    "HEADROOM_LOGS_DIR",
    "HEADROOM_TASK_DIR",
    "HEADROOM_INSTRUCTION_FILE",
    "HEADROOM_AGENT_RESULT",
)


def spec_digest(experiment: Experiment) -> str:
    return hashlib.sha256(json.dumps(experiment.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


def trial_amounts(task: Task, trial: Trial) -> ResourceAmounts:
    """Request and limit of one trial: the configuration's multipliers, or the task's own band."""
    env = task.spec.environment
    if trial.config.task_band:
        return band_amounts(env.cpus, env.memory_mb, env.cpus_limit, env.memory_limit_mb, task.id)
    return scale(env.cpus, env.memory_mb, trial.config)


def _env_network(experiment: Experiment) -> bool:
    own = experiment.environment.network
    return experiment.allow_internet if own is None else own


def _agent_network(experiment: Experiment) -> bool:
    own = experiment.agent.network
    return experiment.allow_internet if own is None else own


def host_agent(experiment: Experiment) -> HostAgent | None:
    """An external agent's sandbox on the host: its directory, the paths the user named, its network."""
    agent = harbor.hosted(experiment).agent
    if agent.kind != "external":
        return None
    return HostAgent(
        path=str(Path(agent.path).resolve()) if agent.path else None,
        host_paths=list(agent.host_paths),
        network=_agent_network(experiment),
        trusted=agent.trusted,
        limits=agent.host_limits or HostLimits(),
    )


def build_launch(
    run_id: str, trial: Trial, try_index: int, task: Task, experiment: Experiment, digest: str | None = None
) -> Launch:
    digest = digest or spec_digest(experiment)
    solution = experiment.agent.kind == "oracle" or harbor.needs_solution(experiment.agent)
    setup = harbor.host_setup(experiment.agent, experiment.model.name, experiment.timeout_multiplier)
    experiment = harbor.hosted(experiment)  # a Harbor agent runs as the external agent that runs it
    env_spec = task.spec.environment
    amounts = trial_amounts(task, trial)
    lim = trial.config.limit_multiplier
    tm = experiment.timeout_multiplier
    contract = {
        "HEADROOM_TASK_ID": task.id,
        "HEADROOM_TRIAL_ID": trial.trial_id,
        "HEADROOM_ATTEMPT": str(trial.attempt),
        "HEADROOM_TRY": str(try_index),
        "HEADROOM_SEED": str(trial.seed),
        "HEADROOM_CONFIG": trial.config.label,
        "HEADROOM_INSTRUCTION": task.instruction,
    }
    oracle = experiment.agent.kind == "oracle"
    agent_env = {**env_spec.env, **(task.spec.solution.env if solution else {}), **task.spec.agent.env, **contract}
    agent = StepLaunch(
        name="agent",
        script="solution/solve.sh" if oracle else None,
        shell=None if oracle else experiment.agent.command,
        env=agent_env,
        secret_env=list(experiment.agent.env_passthrough),
        timeout_s=task.spec.agent.timeout_sec * tm,
    )
    verifier = (
        StepLaunch(
            name="verifier",
            script="tests/test.sh",
            env={**env_spec.env, **task.spec.verifier.env, **contract},
            timeout_s=task.spec.verifier.timeout_sec * tm,
        )
        if task.has_tests
        else None
    )  # a golden task without tests/: its grader alone decides
    return Launch(
        run_id=run_id,
        trial_id=trial.trial_id,
        try_index=try_index,
        name=launch_name(run_id, trial.trial_id, try_index),
        task_id=task.id,
        config_label=trial.config.label,
        attempt=trial.attempt,
        seed=trial.seed,
        agent_kind="external" if experiment.agent.kind == "harbor" else experiment.agent.kind,
        task=TaskSource(
            task_id=task.id,
            path=task.path,
            digest=task.digest,
            docker_image=experiment.image or env_spec.docker_image,
            include_solution=solution,
            architecture=declared_architecture(task),
        ),
        agent=agent,
        verifier=verifier,
        amounts=amounts,
        request_storage_bytes=int(env_spec.storage_mb * MIB * trial.config.request_multiplier),
        limit_storage_bytes=None if lim is None else int(env_spec.storage_mb * MIB * lim),
        allow_internet=_env_network(experiment) and env_spec.network_allowed,
        agent_network=_agent_network(experiment),
        agent_dir=str(Path(experiment.agent.path).resolve())
        if experiment.agent.path and experiment.agent.kind == "command"
        else None,
        host_agent=host.model_copy(update={"setup": setup}) if (host := host_agent(experiment)) else None,
        agent_setup=SetupLaunch(
            shell=install.command, env=agent_env, timeout_s=install.timeout_s, network=install.network
        )
        if (install := experiment.agent.install)
        else None,
        gpus=env_spec.gpus,
        labels={
            "headroom.dev/run": label_value(run_id),
            "headroom.dev/task": label_value(task.id),
            "headroom.dev/config": label_value(trial.config.label),
            "headroom.dev/attempt": str(trial.attempt),
            "headroom.dev/try": str(try_index),
        },
        spec_digest=digest,
        placement=experiment.placement,
    )
