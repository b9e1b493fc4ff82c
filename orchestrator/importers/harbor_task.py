"""Harbor task directories (``task.toml`` schema 1.0 and 1.1) as headroom tasks.

headroom's own loader reads Harbor's spellings, so a Harbor task runs as it is.
This module says, field by field, what headroom makes of it, and fills in the
values Harbor leaves to its defaults (so a task that relies on them still loads).

Harbor defaults (its ``EnvironmentConfig`` / ``VerifierConfig``): cpus 1,
memory_mb 2048, storage_mb 10240, verifier timeout 600 s. Harbor's agent timeout
has no default (no timeout at all); headroom needs one, so such a task is refused
unless a default is given.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from orchestrator.importers.fields import CONVERTED, DEFAULTED, IGNORED, KEPT, FieldReport
from orchestrator.spec.task import (
    HARBOR_IGNORED,
    HARBOR_NEEDS,
    EnvironmentSpec,
    SolutionSpec,
    StepSpec,
    TaskSpec,
    VerifierSpec,
    size_to_mb,
)
from orchestrator.spec.unknown import did_you_mean, valid_names

HARBOR_DEFAULTS = {"cpus": 1, "memory_mb": 2048, "storage_mb": 10240, "verifier_timeout_sec": 600.0}

# Fields headroom reads and acts on. Harbor's others are listed as ignored (HARBOR_IGNORED); any other key is
# a problem naming the closest valid one.
_ENV_USED = {
    "cpus",
    "memory_mb",
    "storage_mb",
    "docker_image",
    "build_timeout_sec",
    "env",
    "gpus",
    "allow_internet",
    "runs_on_host",
}
_ENV_SIZES = {"memory": "memory_mb", "storage": "storage_mb"}
_STEP_USED = {"timeout_sec", "env"}
_TOP_USED = {
    "version",
    "schema_version",
    "environment",
    "agent",
    "verifier",
    "solution",
    "metadata",
    "provenance",
    "task",
    "source",
}
_NOT_ENFORCED = {
    "gpus": "a backend without GPUs refuses the task",
    "allow_internet": "true: the task needs the network, and a sweep without --allow-internet refuses it; "
    "false: it runs without network",
    "docker_image": "a backend that cannot run images (local) refuses the task unless --run-on-host",
}
_SECTION_MODELS: dict[str, type[BaseModel]] = {
    "environment": EnvironmentSpec,
    "agent": StepSpec,
    "verifier": VerifierSpec,
    "solution": SolutionSpec,
}


def _unknown(section: str, key: str) -> str:
    model = _SECTION_MODELS.get(section, TaskSpec)
    where = f"{section}.{key}" if section else key
    return f"task.toml: {where}: unknown key{did_you_mean(key, valid_names(model))}"


def _ignored(where: str) -> tuple[str, str, str]:
    return IGNORED, where, "a Harbor field headroom does not use"


#: Harbor fields headroom does not act on but reads as the task's needs (spec/task.py HARBOR_NEEDS)
_AS_NEED = {
    "network_mode": "read as a need: public or allowlist needs the network (a sweep without --allow-internet "
    "refuses the task), no-network is a promise; headroom gives all or nothing, never an allowlist",
    "allowed_hosts": "the hosts of network_mode = allowlist: the task needs the network",
    "os": "read as a need: a task for windows containers is refused (headroom's backends run Linux)",
    "tpu": "read as a need: every headroom backend refuses the task (none gives TPUs)",
}


def _as_need(where: str, key: str) -> tuple[str, str, str]:
    return KEPT, where, _AS_NEED[key]


def normalize(
    raw: dict[str, Any], *, agent_timeout_default: float | None = None
) -> tuple[dict[str, Any], FieldReport, list[str]]:
    """A Harbor task.toml mapping -> (the same task in headroom's spelling, field report, problems).

    Problems are reasons the task cannot be used; the caller lists them and skips the task.
    """
    spec = copy.deepcopy(raw)
    rep = FieldReport()
    problems: list[str] = []
    for key in raw:
        if key in _TOP_USED or key in valid_names(TaskSpec):
            continue  # reported below
        if key in HARBOR_IGNORED[""]:
            rep.add(*_ignored(key))
        else:
            problems.append(_unknown("", key))
    if "schema_version" in raw:
        rep.add(KEPT, "schema_version", f"Harbor task schema {raw['schema_version']}")
        spec.setdefault("version", str(raw["schema_version"]))
    elif "version" in raw:
        rep.add(KEPT, "version", f"Harbor task schema {raw['version']}")
    if isinstance(raw.get("task"), dict):
        rep.add(KEPT, "task", f"package {raw['task'].get('name')!r} (schema 1.1)")
    for key in ("metadata", "source"):
        if key in raw:
            rep.add(KEPT, key)

    env = spec.setdefault("environment", {})
    if not isinstance(env, dict):
        return spec, rep, ["[environment] must be a table"]
    for key, target in _ENV_SIZES.items():
        if key in env:
            try:
                mib = size_to_mb(env[key])  # the loader's own reading of Harbor sizes
            except ValueError as exc:
                problems.append(f"environment.{key}: {exc}")
                continue
            if target in env and env[target] != mib:
                problems.append(f"environment.{key} = {env[key]!r} disagrees with {target} = {env[target]}")
                continue
            env.pop(key)
            env[target] = mib
            rep.add(
                CONVERTED,
                f"environment.{key}",
                f"size -> environment.{target} (MiB; G = GiB); headroom's loader reads this spelling too",
            )
    for key in ("cpus", "memory_mb", "storage_mb"):
        if key in env:
            if key in raw.get("environment", {}):
                rep.add(KEPT, f"environment.{key}")
        else:
            env[key] = HARBOR_DEFAULTS[key]
            rep.add(DEFAULTED, f"environment.{key}", f"absent: Harbor's default {HARBOR_DEFAULTS[key]}")
    for key, value in raw.get("environment", {}).items():
        if key in _ENV_SIZES or key in ("cpus", "memory_mb", "storage_mb"):
            continue
        if key in _ENV_USED:
            note = ""
            if key in _NOT_ENFORCED and (key != "gpus" or value) and (key != "allow_internet" or value is False):
                note = _NOT_ENFORCED[key]
            if key == "env" and isinstance(value, dict):
                note = f"{len(value)} variable(s) for the task's environment"
            rep.add(KEPT, f"environment.{key}", note)
        elif key in HARBOR_NEEDS["environment"]:
            rep.add(*_as_need(f"environment.{key}", key))
        elif key in HARBOR_IGNORED["environment"]:
            rep.add(*_ignored(f"environment.{key}"))
        elif key not in valid_names(EnvironmentSpec):
            problems.append(_unknown("environment", key))

    agent = spec.setdefault("agent", {})
    if not isinstance(agent, dict):
        return spec, rep, problems + ["[agent] must be a table"]
    if agent.get("timeout_sec") is None:
        if agent_timeout_default is None:
            problems.append(
                "agent.timeout_sec is missing: Harbor then runs the agent without a time limit; "
                "headroom needs one (give --agent-timeout SEC)"
            )
        else:
            agent["timeout_sec"] = float(agent_timeout_default)
            rep.add(DEFAULTED, "agent.timeout_sec", f"absent: --agent-timeout {agent_timeout_default:g}")
    verifier = spec.setdefault("verifier", {})
    if not isinstance(verifier, dict):
        return spec, rep, problems + ["[verifier] must be a table"]
    if verifier.get("timeout_sec") is None:
        verifier["timeout_sec"] = HARBOR_DEFAULTS["verifier_timeout_sec"]
        rep.add(DEFAULTED, "verifier.timeout_sec", "absent: Harbor's default 600")
    for section in ("agent", "verifier", "solution"):
        body = raw.get(section)
        if not isinstance(body, dict):
            continue
        for key, value in body.items():
            if key in _STEP_USED or (section == "verifier" and key == "outputs"):  # headroom's own: carried outputs
                note = f"{len(value)} variable(s)" if key == "env" and isinstance(value, dict) else ""
                rep.add(KEPT, f"{section}.{key}", note)
            elif key in HARBOR_NEEDS.get(section, frozenset()):
                rep.add(*_as_need(f"{section}.{key}", key))
            elif key in HARBOR_IGNORED[section]:
                rep.add(*_ignored(f"{section}.{key}"))
            else:
                problems.append(_unknown(section, key))
    return spec, rep, problems
