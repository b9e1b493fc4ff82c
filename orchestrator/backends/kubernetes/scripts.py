"""The two POSIX-sh programs a trial pod runs: the runner (task container) and the warden (tests holder).

The runner is generated: its phases are :data:`orchestrator.contract.phases.DEFINITION`, rendered as sh by
:mod:`.phase_sh` (up to ``stop`` in the agent's container, the rest in the verifier's), its sanitiser
the contract's ``sanitise.sh`` (with its bounds), its own fixed PATH the sanitiser's
(:data:`orchestrator.contract.sanitiser.PATH`) and its verifier environment
:mod:`orchestrator.contract.verifier_env`'s, so the Pod runs the one contract the other backends run,
never a copy of it.
"""

from __future__ import annotations

import shlex
from functools import cache
from importlib.resources import files

from orchestrator.backends.kubernetes import phase_sh
from orchestrator.backends.kubernetes.phase_sh import agent_side, verifier_side
from orchestrator.contract import agent_check, phases, sanitiser, verifier_env


@cache
def runner() -> str:
    text = files(__package__).joinpath("runner.sh").read_text()
    for key, value in (
        ("@PHASES@", phase_sh.render()),
        ("@AGENT_SKIPS@", " ".join(phases.ending_words(agent_side))),
        ("@BEFORE_AGENT_SKIPS@", "|".join(phase_sh.before_agent)),
        ("@AGENT_PHASES@", " ".join(p.value for p in agent_side)),
        ("@VERIFIER_PHASES@", " ".join(p.value for p in verifier_side)),
        ("@SANITISER@", shlex.quote(sanitiser.script())),
        ("@VERIFIER_ENV@", verifier_env.shell_exports()),
        ("@FIXED_PATH@", shlex.quote(sanitiser.PATH)),
        ("@SAN_MAX_LINKS@", str(sanitiser.MAX_LINKS)),
        ("@SAN_RESOLVE_S@", str(sanitiser.RESOLVE_S)),
        ("@SAN_BUDGET_S@", str(sanitiser.BUDGET_S)),
        ("@AGENT_CHECK@", shlex.quote(agent_check.SCRIPT)),
    ):
        if key not in text:
            raise RuntimeError(f"runner.sh has no {key}")  # a packaging mistake, caught by every pod test
        text = text.replace(key, value)
    return text


@cache
def warden() -> str:
    text = files(__package__).joinpath("warden.sh").read_text()
    if "@FIXED_PATH@" not in text:
        raise RuntimeError("warden.sh has no @FIXED_PATH@")
    return text.replace("@FIXED_PATH@", shlex.quote(sanitiser.PATH))
