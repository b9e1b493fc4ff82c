"""Harbor's agents, run unchanged: ``agent.kind: harbor`` becomes an external agent whose program is Harbor's own
interpreter running :mod:`orchestrator.agents.harbor.adapter`.

Harbor 0.25 needs Python >= 3.12 and headroom supports 3.11, so headroom never imports Harbor: the adapter runs in
an interpreter that has it (``scripts/harbor/install.sh`` makes one in ``.cache/harbor/venv``), inside the
external agent's host sandbox, and acts on the trial only through the exec channel, with its model calls through
the gateway. Everything an external agent gets (sandbox, timeouts, exec log, gateway accounting) it gets too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

from orchestrator.errors import SpecError
from orchestrator.spec.experiment import AgentSpec, Experiment

#: The interpreter that has Harbor, when it is not the default venv's.
PYTHON_VAR = "HEADROOM_HARBOR_PYTHON"
#: The pin scripts/harbor/install.sh installs and pyproject's ``harbor`` extra names.
PIN = "harbor==0.25.0"
ADAPTER = Path(__file__).with_name("adapter.py")
REPO = Path(__file__).resolve().parents[3]
DEFAULT_VENV = REPO / ".cache" / "harbor" / "venv"
#: Harbor agents that need the task's solution in the environment (as headroom's own oracle does).
NEEDS_SOLUTION = ("oracle",)


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


def command(agent: AgentSpec, model: str | None, interpreter: str) -> str:
    """The shell command of the external agent that runs ``agent`` (a Harbor agent) through the adapter."""
    spec = {
        "name": agent.name,
        "import_path": agent.import_path,
        "model": agent.model or model,
        "kwargs": agent.kwargs,
        "path": str(Path(agent.path).resolve()) if agent.path else None,
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
    external = AgentSpec(
        kind="external",
        command=command(agent, experiment.model.name, interpreter),
        network=agent.network,
        env_passthrough=list(agent.env_passthrough),
        path=agent.path,
        host_paths=list(agent.host_paths),
        trusted=agent.trusted,
        host_limits=agent.host_limits,
    )
    return experiment.model_copy(update={"agent": external})
