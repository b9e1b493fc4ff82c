"""Harbor's agents, run unchanged: ``agent.kind: harbor`` becomes an external agent whose program is Harbor's own
interpreter running :mod:`orchestrator.agents.harbor.adapter`.

Harbor 0.25 needs Python >= 3.12 and headroom supports 3.11, so headroom never imports Harbor: the adapter runs in
an interpreter that has it (``scripts/harbor/install.sh`` makes one in ``.cache/harbor/venv``), inside the
external agent's host sandbox, and acts on the trial only through the exec channel, with its model calls through
the gateway. Everything an external agent gets (sandbox, timeouts, exec log, gateway accounting) it gets too.

An installed Harbor agent (claude-code, codex, aider...: its ``setup`` runs an install script in the environment)
gets headroom's ``agent_setup`` phase: a first run of the adapter, in the same sandbox, that runs ``setup`` alone
(:func:`host_setup`), timed apart and, when it fails, ``infra_error(agent_setup_failed)``: an install is the
harness's business, never the model's failure, and never spends the agent's time.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchestrator.errors import SpecError
from orchestrator.spec.experiment import AgentSpec, Experiment
from orchestrator.spec.launch import HostSetup

#: The interpreter that has Harbor, when it is not the default venv's.
PYTHON_VAR = "HEADROOM_HARBOR_PYTHON"
#: The pin scripts/harbor/install.sh installs and pyproject's ``harbor`` extra names.
PIN = "harbor==0.25.0"
ADAPTER = Path(__file__).with_name("adapter.py")
REPO = Path(__file__).resolve().parents[3]
DEFAULT_VENV = REPO / ".cache" / "harbor" / "venv"
#: Harbor agents that need the task's solution in the environment (as headroom's own oracle does).
NEEDS_SOLUTION = ("oracle",)
#: Harbor's own default (``BaseAgent.DEFAULT_SETUP_TIMEOUT_SEC``) where the agent's class is not looked at.
DEFAULT_SETUP_TIMEOUT_S = 360.0
#: How long the registry look-up may take (it imports Harbor's factory: seconds on a loaded machine).
DESCRIBE_TIMEOUT_S = 120


def python() -> str:
    """Harbor's interpreter: $HEADROOM_HARBOR_PYTHON, else the repo's .cache/harbor/venv, else this interpreter
    when it is >= 3.12 and has Harbor (the ``harbor`` extra); a one-line :class:`SpecError` when there is none."""
    given = os.environ.get(PYTHON_VAR)
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise SpecError(
                f"${PYTHON_VAR} is {given!r}, which is not an executable interpreter "
                "(run scripts/harbor/install.sh; it prints the path)",
                field="agent.kind",
            )
        return given
    venv = DEFAULT_VENV / "bin" / "python"
    if venv.is_file():
        return str(venv)
    if sys.version_info >= (3, 12) and importlib.util.find_spec("harbor") is not None:
        return sys.executable
    raise SpecError(
        f"agent kind 'harbor' needs {PIN} in an interpreter of its own (Python >= 3.12): run "
        f"scripts/harbor/install.sh, or set ${PYTHON_VAR}",
        field="agent.kind",
    )


def needs_solution(agent: AgentSpec) -> bool:
    return agent.kind == "harbor" and agent.name in NEEDS_SOLUTION


@functools.lru_cache(maxsize=32)
def _describe(interpreter: str, name: str) -> tuple[tuple[str, Any], ...]:
    try:
        r = subprocess.run(  # noqa: S603 -- Harbor's own interpreter and registry, no agent code
            [interpreter, "-s", str(ADAPTER), "--describe", json.dumps({"name": name})],
            capture_output=True,
            text=True,
            timeout=DESCRIBE_TIMEOUT_S,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"Harbor's interpreter {interpreter!r} could not be asked about agent {name!r}: {exc}") from exc
    try:
        answer = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpecError(
            f"Harbor's interpreter {interpreter!r} failed to read its agent registry ({tail}); "
            "re-run scripts/harbor/install.sh",
            field="agent.name",
        ) from None
    return tuple(sorted(answer.items(), key=lambda kv: kv[0]))


def describe(agent: AgentSpec) -> dict[str, Any]:
    """What Harbor's registry says of ``agent`` (``installed``: its setup is an install; ``setup_timeout_s``).
    A name Harbor does not know is a one-line :class:`SpecError` naming a few it does. A custom agent
    (``import_path``) is not imported on the host: ``installed`` is None, and the sandboxed setup phase decides."""
    if not agent.name:
        return {"known": True, "installed": None, "setup_timeout_s": DEFAULT_SETUP_TIMEOUT_S}
    answer = dict(_describe(python(), agent.name))
    if not answer.get("known"):
        names = [str(n) for n in answer.get("names") or []]
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise SpecError(
            f"{agent.name!r} is not an agent in Harbor's registry ({PIN}); known: {shown}", field="agent.name"
        )
    return answer


def host_setup(agent: AgentSpec, model: str | None, timeout_multiplier: float) -> HostSetup | None:
    """The agent_setup phase of a Harbor agent whose ``setup`` is (or may be) an install: the adapter run with
    ``phase: setup``, under Harbor's setup timeout for the class times the sweep's timeout multiplier. None for
    any other agent (its ``setup`` holds state of its process, so it stays in the agent step)."""
    if agent.kind != "harbor":
        return None
    facts = describe(agent)
    if facts.get("installed") is False:
        return None
    timeout = float(facts.get("setup_timeout_s") or DEFAULT_SETUP_TIMEOUT_S) * timeout_multiplier
    return HostSetup(shell=command(agent, model, python(), phase="setup"), timeout_s=timeout)


def command(agent: AgentSpec, model: str | None, interpreter: str, phase: str | None = None) -> str:
    """The shell command of the external agent that runs ``agent`` (a Harbor agent) through the adapter;
    ``phase``: "setup" or "run" for an agent whose setup is headroom's agent_setup phase, None: both in one."""
    spec = {
        "name": agent.name,
        "import_path": agent.import_path,
        "model": agent.model or model,
        "kwargs": agent.kwargs,
        "path": str(Path(agent.path).resolve()) if agent.path else None,
        **({"phase": phase} if phase else {}),
    }
    # -s: no user site-packages (the sandbox's HOME is its own anyway); not -E: PYTHONPATH carries the exec client
    return f"{shlex.quote(interpreter)} -s {shlex.quote(str(ADAPTER))} {shlex.quote(json.dumps(spec, sort_keys=True))}"


def hosted(experiment: Experiment) -> Experiment:
    """The experiment as it runs: a Harbor agent becomes the external agent that runs it (any other: unchanged).
    The record keeps the experiment as written (``kind: harbor``, its name)."""
    agent = experiment.agent
    if agent.kind != "harbor":
        return experiment
    interpreter = python()
    phase = "run" if describe(agent).get("installed") is not False else None
    external = AgentSpec(
        kind="external",
        command=command(agent, experiment.model.name, interpreter, phase),
        network=agent.network,
        env_passthrough=list(agent.env_passthrough),
        path=agent.path,
        host_paths=list(agent.host_paths),
        trusted=agent.trusted,
        host_limits=agent.host_limits,
    )
    return experiment.model_copy(update={"agent": external})
