"""The experiment: which tasks, which resource configurations, how many attempts, which agent.

Agent, model and sampling metadata are opaque to the engine: recorded in
provenance, never interpreted. Environment variables passed to the agent are
recorded by NAME only, so an API key never reaches the store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.errors import SpecError
from orchestrator.spec.artifacts import ArtifactsSpec
from orchestrator.spec.defaults import DEFAULT_MULTIPLIERS, MAX_TIMEOUT_MULTIPLIER
from orchestrator.spec.docker import DockerOptions
from orchestrator.spec.gateway import GatewaySpec
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import HostLimits
from orchestrator.spec.outcome import TRIAL_CAUSED, InfraReason
from orchestrator.spec.resources import ResourceConfig
from orchestrator.spec.unknown import first_validation_error

#: What a POSIX shell accepts as a variable name: --agent-env takes names only, never NAME=VALUE.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BACKENDS = ("local", "kubernetes", "docker")
#: A Harbor agent, by name or by import path (checked against Harbor's own catalogue when it starts).
HARBOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
HARBOR_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def env_name_problem(name: str) -> str:
    if "=" in name:
        return (
            f"{name!r} is not a variable name: give the name only ({name.split('=', 1)[0]!r}); "
            "its value is read from this environment and never recorded"
        )
    return f"{name!r} is not a valid environment variable name (letters, digits and _, not starting with a digit)"


class AgentInstall(BaseModel):
    """The installed agent's install phase: run in the trial's environment before the agent, timed and networked
    on its own, recorded apart (``extra.agent_setup``); its failure is ``infra_error(agent_setup_failed)``."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="shell command, run with bash -c in the environment")
    timeout_s: float = Field(default=600.0, gt=0)
    network: bool = Field(default=True, description="network for the install (a package registry, say)")


class AgentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["oracle", "command", "external", "harbor"] = "oracle"
    command: str | None = Field(
        default=None,
        description="shell command: kind=command runs it inside the trial's environment; kind=external "
        "runs it on the host, acting on the environment through $HEADROOM_EXEC (docs/agents.md)",
    )
    network: bool | None = Field(
        default=None,
        description="network of the agent's own process; None: allow_internet. A command agent runs "
        "inside the environment, so its step gets this network; an external agent runs on the host in a sandbox "
        "of its own: true shares the host's network with it, false leaves it its own loopback and the model "
        "gateway (docs/isolation.md)",
    )
    env_passthrough: list[str] = Field(
        default_factory=list,
        description="names of host environment variables handed to the agent (values are never recorded)",
    )
    path: str | None = Field(
        default=None,
        description="an installed agent: a host directory made available in the environment at "
        "/agent (local: mounted read-only; docker: copied in; kubernetes: a read-only ConfigMap), as "
        "$HEADROOM_AGENT_DIR. An external agent: its directory on the host, read-only in its sandbox at the "
        "same path, and its working directory",
    )
    host_paths: list[str] = Field(
        default_factory=list,
        description="external agents: more host paths (absolute) its sandbox shows read-only at the same path, "
        "such as a credential it needs; nothing of the host is shown that is not named or found (docs/isolation.md)",
    )
    trusted: bool = Field(
        default=False,
        description="external agents: where the host sandbox cannot start, run the agent unsandboxed, as "
        "headroom's user, instead of refusing the sweep; every report says so",
    )
    host_limits: HostLimits | None = Field(
        default=None,
        description="external agents: the bounds of its process tree on the host (memory_mb, pids, disk_mb); "
        "None: the defaults (docs/isolation.md)",
    )
    install: AgentInstall | None = Field(default=None, description="the installed agent's install phase")
    name: str | None = Field(
        default=None,
        description="kind=harbor: the Harbor agent's name (oracle, nop, terminus-2, claude-code, codex, ...), run "
        "unchanged by Harbor's own interpreter as an external agent (docs/agents.md)",
    )
    import_path: str | None = Field(
        default=None, description="kind=harbor: a custom Harbor agent, 'module.path:ClassName' (instead of name)"
    )
    model: str | None = Field(
        default=None,
        description="kind=harbor: the model name Harbor's agent is given (as Harbor's --model, e.g. "
        "'openai/gpt-5' or 'anthropic/claude-sonnet-4-5'); default: model.name",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="kind=harbor: keyword arguments for the Harbor agent (as Harbor's --ak)"
    )

    @field_validator("env_passthrough")
    @classmethod
    def _names_only(cls, names: list[str]) -> list[str]:
        for name in names:
            if not ENV_NAME.fullmatch(name):
                raise ValueError(env_name_problem(name))
        return names

    @model_validator(mode="before")
    @classmethod
    def _harbor_name_as_import_path(cls, data: Any) -> Any:
        # a Harbor agent named 'module:Class' (as --harbor-agent takes it) is a custom agent: its import path
        if isinstance(data, dict) and data.get("kind") == "harbor" and not data.get("import_path"):
            name = data.get("name")
            if isinstance(name, str) and ":" in name:
                return {**{k: v for k, v in data.items() if k != "name"}, "import_path": name}
        return data

    @model_validator(mode="before")
    @classmethod
    def _command_implies_kind(cls, data: Any) -> Any:
        # {command: ...} alone means the user's agent, never the oracle.
        if isinstance(data, dict) and data.get("command") and "kind" not in data:
            return {**data, "kind": "command"}
        return data

    @model_validator(mode="after")
    def _command_needs_command(self) -> AgentSpec:
        if self.kind in ("command", "external") and not (self.command and self.command.strip()):
            raise ValueError(f"agent kind '{self.kind}' needs a command")
        if self.kind not in ("command", "external", "harbor") and self.path:
            raise ValueError("an agent directory is for kind 'command' (an installed agent), 'external' or 'harbor'")
        if self.kind != "command" and self.install:
            raise ValueError(
                "an install phase is for kind 'command' (an installed agent: it runs inside the environment)"
            )
        if self.kind not in ("external", "harbor") and (self.host_paths or self.trusted or self.host_limits):
            raise ValueError(
                "host_paths, host_limits and trusted are for kind 'external' or 'harbor' (an agent that runs on the host)"
            )
        self._check_harbor()
        for p in self.host_paths:
            if not p.startswith("/") or p.rstrip("/") == "":
                raise ValueError(f"host_paths takes absolute paths other than /, got {p!r}")
        if self.kind == "oracle" and self.command:
            raise ValueError("the oracle agent runs the task's solution and takes no command; use kind 'command'")
        return self

    def _check_harbor(self) -> None:
        if self.kind != "harbor":
            if self.name or self.import_path or self.model or self.kwargs:
                raise ValueError("name, import_path, model and kwargs are for kind 'harbor' (a Harbor agent)")
            return
        if self.command:
            raise ValueError("a Harbor agent is named (agent.name or agent.import_path) and takes no command")
        if bool(self.name) == bool(self.import_path):
            raise ValueError(
                "agent kind 'harbor' needs one of name (e.g. 'terminus-2') or import_path ('module:Class')"
            )
        if self.import_path and not HARBOR_IMPORT_PATH.fullmatch(self.import_path):
            raise ValueError(f"import_path takes 'module.path:ClassName', got {self.import_path!r}")
        if self.name and not HARBOR_NAME.fullmatch(self.name):
            raise ValueError(f"{self.name!r} is not a Harbor agent name (letters, digits, '-', '_', '.')")


class EnvironmentOptions(BaseModel):
    """The trial's environment, apart from the agent: where the task's commands, the exec channel's and the
    verifier's, run."""

    model_config = ConfigDict(extra="forbid")

    network: bool | None = Field(
        default=None,
        description="network of the trial's environment; None: allow_internet. A task with "
        "allow_internet = false gets none whatever this says",
    )


class ModelSpec(BaseModel):
    """Who is being evaluated. Opaque to the engine; recorded with every run."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)


class RetryPolicy(BaseModel):
    """Bounded retries of infrastructure errors. Every try stays on record."""

    model_config = ConfigDict(extra="forbid")

    max_retries: int = Field(default=0, ge=0, le=10)
    reasons: list[InfraReason] = Field(
        default_factory=lambda: [r for r in InfraReason if r not in TRIAL_CAUSED],
        description="infra reasons worth retrying; by default none a trial's own processes can cause (OOM kills, "
        "the storage limit): those are the measurement, and retrying them "
        "would let an agent re-roll a try it is failing",
    )


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "sweep"
    tasks_dir: str
    tasks: list[str] | None = Field(default=None, description="task ids or glob patterns; None = all")
    configurations: list[ResourceConfig] = Field(
        default_factory=lambda: [ResourceConfig.parse(m) for m in DEFAULT_MULTIPLIERS], min_length=1
    )
    attempts: int = Field(default=3, ge=1, le=10_000)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    concurrency: int = Field(default=2, ge=1, le=256)
    seed: int = 0
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout_multiplier: float = Field(
        default=1.0,
        gt=0,
        le=MAX_TIMEOUT_MULTIPLIER,
        allow_inf_nan=False,
        description="scales every task's agent and verifier timeouts (bounded: a timeout must stay a timeout)",
    )
    reward_threshold: float = Field(default=1.0, allow_inf_nan=False, description="reward at or above this passes")
    backend: Literal["local", "kubernetes", "docker"] = Field(default="local", description="where trials run")
    image: str | None = Field(
        default=None, description="container backends: image for every task, instead of each task's docker_image"
    )
    run_on_host: bool = Field(
        default=False,
        description="local backend: run tasks that name a container image (docker_image or environment/Dockerfile) "
        "on the host anyway, without their image. Off, such tasks are refused before the sweep, since their "
        "scripts usually need the image's files and tools; on, the choice and the tasks it applies to are "
        "recorded in provenance and shown in reports",
    )
    allow_internet: bool = Field(
        default=False,
        description="the default of agent.network and environment.network (a task with "
        "allow_internet = false still gets no network in its environment)",
    )
    environment: EnvironmentOptions = Field(
        default_factory=EnvironmentOptions, description="the trial's environment: its network"
    )
    kubernetes: KubernetesOptions | None = Field(default=None, description="backend kubernetes: namespace, queue, ...")
    placement: Literal["default", "limit-aware"] = Field(
        default="default",
        description="limit-aware: the memory limits of concurrently running trials never add up to more than the "
        "machine has (local backend: a cap in the engine; kubernetes: per node, through the extended resource "
        "headroom.dev/memory-limit-mib that `headroom cluster nodes advertise` puts on nodes); default: only --concurrency "
        "and the scheduler's requests bound them",
    )
    docker: DockerOptions | None = Field(default=None, description="options of the docker backend")
    artifacts: ArtifactsSpec = Field(
        default_factory=ArtifactsSpec, description="what is kept of each try's logs dir, output and exec log"
    )
    gateway: GatewaySpec | None = Field(
        default=None,
        description="measure model usage: trials call their model through a loopback gateway "
        "(docs/agents.md); None: no gateway, usage is what the agent reports",
    )

    @field_validator("configurations", mode="before")
    @classmethod
    def _parse_labels(cls, value: Any) -> Any:
        if isinstance(value, list):  # YAML gives [1, 3, unbounded] as ints and strings
            return [
                ResourceConfig.parse(str(v)) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else v
                for v in value
            ]
        return value

    @model_validator(mode="after")
    def _unique_configurations(self) -> Experiment:
        labels = [c.label for c in self.configurations]
        dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
        if dupes:
            raise ValueError(f"configuration listed twice: {', '.join(dupes)}")
        return self


# ---- command-line flags over an experiment ---------------------------------------------------------


@dataclass(frozen=True)
class Flag:
    """Where a command-line flag lands in an experiment, and how an error about its value names it."""

    name: str  # as the user types it: "--attempts"
    path: tuple[str, ...]  # the experiment field it sets: ("agent", "kind")


#: The sections a flag writes into, field by field: in an experiment file each must be a mapping.
NESTED = ("agent", "model", "retry", "kubernetes", "docker")
#: Sections that configure one backend; a file that holds one for another backend is refused, not ignored.
BACKEND_SECTIONS = ("kubernetes", "docker")


class ExperimentOverrides(BaseModel):
    """What the command line says about an experiment: a typed partial, applied over an experiment file.

    A field is set only when its flag was given (its name is the click parameter's); each carries the
    ``Flag`` it came from, so a value the experiment refuses is reported against the flag, and a value
    from the file against the file's field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str | None, Flag("--name", ("name",))] = None
    tasks_dir: Annotated[str | None, Flag("TASKS_DIR", ("tasks_dir",))] = None
    multipliers: Annotated[list[ResourceConfig] | None, Flag("--multipliers", ("configurations",))] = None
    attempts: Annotated[int | None, Flag("--attempts", ("attempts",))] = None
    concurrency: Annotated[int | None, Flag("--concurrency", ("concurrency",))] = None
    seed: Annotated[int | None, Flag("--seed", ("seed",))] = None
    timeout_multiplier: Annotated[float | None, Flag("--timeout-multiplier", ("timeout_multiplier",))] = None
    agent_kind: Annotated[str | None, Flag("--agent", ("agent", "kind"))] = None
    agent_command: Annotated[str | None, Flag("--agent-command", ("agent", "command"))] = None
    agent_env: Annotated[list[str] | None, Flag("--agent-env", ("agent", "env_passthrough"))] = None
    trusted_agent: Annotated[bool | None, Flag("--trusted-agent", ("agent", "trusted"))] = None
    harbor_agent: Annotated[str | None, Flag("--harbor-agent", ("agent", "name"))] = None  # or 'module:Class'
    agent_kwarg: Annotated[dict[str, Any] | None, Flag("--agent-kwarg", ("agent", "kwargs"))] = None
    allow_internet: Annotated[bool | None, Flag("--allow-internet/--no-internet", ("allow_internet",))] = None
    model: Annotated[str | None, Flag("--model", ("model", "name"))] = None
    task_patterns: Annotated[list[str] | None, Flag("--task", ("tasks",))] = None
    backend_name: Annotated[str | None, Flag("--backend", ("backend",))] = None
    placement: Annotated[str | None, Flag("--placement", ("placement",))] = None
    retries: Annotated[int | None, Flag("--retries", ("retry", "max_retries"))] = None
    namespace: Annotated[str | None, Flag("--namespace", ("kubernetes", "namespace"))] = None
    kube_context: Annotated[str | None, Flag("--kube-context", ("kubernetes", "context"))] = None
    queue: Annotated[str | None, Flag("--queue", ("kubernetes", "queue"))] = None
    keep_pods: Annotated[bool | None, Flag("--keep-pods", ("kubernetes", "keep_pods"))] = None
    build: Annotated[bool | None, Flag("--build", ("docker", "build"))] = None
    run_on_host: Annotated[bool | None, Flag("--run-on-host", ("run_on_host",))] = None

    @classmethod
    def flag_of(cls, field: str) -> Flag:
        return next(m for m in cls.model_fields[field].metadata if isinstance(m, Flag))

    def given(self) -> dict[str, Flag]:
        """The flags given, by field name."""
        return {
            f: self.flag_of(f)
            for f in type(self).model_fields
            if f in self.model_fields_set and getattr(self, f) is not None
        }

    def flags(self) -> list[str]:
        return [flag.name for flag in self.given().values()]

    def apply(self, base: Mapping[str, Any], source: str | None = None) -> Experiment:
        """The experiment ``base`` (an experiment file's mapping, ``source`` its path) says, with these flags over it.

        One validation of the merge: a refused value is one line naming the flag that gave it, or the file
        and field it came from.
        """
        merged = dict(base)
        for key in NESTED:
            if merged.get(key) is not None and not isinstance(merged[key], Mapping):
                raise SpecError(f"expected a mapping, got {type(merged[key]).__name__}", file=source, field=key)
        for field, flag in self.given().items():
            value = getattr(self, field)
            *parents, leaf = flag.path
            target = merged
            for key in parents:  # a copy of each section, so the caller's mapping is never changed
                target[key] = dict(target.get(key) or {})
                target = target[key]
            target[leaf] = value
        try:
            experiment = Experiment.model_validate(merged)
        except ValidationError as exc:
            where, msg = first_validation_error(exc, Experiment)
            loc = tuple(where.split("."))
            blamed = [
                flag.name for flag in self.given().values() if flag.path[: len(loc)] == loc[: len(flag.path)]
            ]  # one path is a prefix of the other
            if blamed:
                raise SpecError(msg, field=", ".join(sorted(blamed))) from None
            raise SpecError(msg, file=source, field=where) from None
        for section in BACKEND_SECTIONS:
            if base.get(section) is not None and experiment.backend != section:
                raise SpecError(
                    f"a {section} section applies to backend {section}, and this experiment runs on "
                    f"{experiment.backend}: remove the section or set backend: {section}",
                    file=source,
                    field=section,
                )
        return experiment
