"""The Pod runner's phases, generated from :data:`orchestrator.contract.phases.DEFINITION`.

A task image may have no Python, so the Pod runs the contract as POSIX sh. ``runner.sh`` holds the Pod's
own step runner (``command_step``, ``external_step``, ``script_agent_check``, ``stop_agent``, ``take_tests``,
``script_sanitise``, ``read_reward``: how a step runs, under a watchdog, in a container with no one outside
it) and no phase. Each ``phase_<name>`` function is rendered here from its definition: whether it applies,
which operation it calls with which time bound and command variables, and the words that end the try after
it; so a phase added or changed in the definition changes the Pod's runner with it (tests/contract hold
the two to each other).
"""

from __future__ import annotations

import re

from orchestrator.contract import phases
from orchestrator.contract.phases import Failure, Op, Phase, PhaseDef

#: The phases up to ``stop`` run in the agent's container, the rest in the verifier's (a fresh root filesystem).
_CUT = phases.PHASES.index(Phase.STOP) + 1
agent_side: tuple[Phase, ...] = phases.PHASES[:_CUT]
verifier_side: tuple[Phase, ...] = phases.PHASES[_CUT:]
#: The ending words of the phases before the agent's: the agent never ran, so there is no work dir to carry.
before_agent: tuple[str, ...] = phases.ending_words(phases.PHASES[: phases.PHASES.index(Phase.AGENT)])

#: The Pod's task dir as each role sees it: the agent's without the tests, the verifier's copy with them.
_TASK_DIR = {"agent": "$TASK", "verifier": "$RUN/vtask"}
#: Everything the definition puts into the runner is one of these (a word the sh needs no quoting for).
_WORD = re.compile(r"^[A-Za-z0-9_./!-]+$")


def _word(value: str | None) -> str:
    if value is None or not _WORD.match(value):
        raise ValueError(f"a phase definition's value cannot go into the Pod runner: {value!r}")
    return value


def _timeout(d: PhaseDef) -> str:
    if d.timeout is None:
        raise ValueError(f"phase {d.phase} runs something and has no timeout")
    if d.timeout.launch:
        return f'"${{HR_{_word(d.pod_prefix)}_TIMEOUT:-{phases.DEFAULT_S}}}"'
    return str(int(d.timeout.seconds or 0))


def _command(d: PhaseDef) -> list[str]:
    if d.role is None:
        raise ValueError(f"phase {d.phase} runs a command and has no role")
    p = _word(d.pod_prefix)
    script = f"${{HR_{p}_SCRIPT:-{_word(d.default_script)}}}" if d.default_script else f"${{HR_{p}_SCRIPT:-}}"
    logs, output, task = _word(d.logs), _word(d.output), _TASK_DIR[d.role]
    body = []
    if d.optional:  # no command of this kind in the launch: the phase does not apply
        body.append(f'[ -n "${{HR_{p}_SCRIPT:-}}${{HR_{p}_SHELL:-}}" ] || return 0')
    run = (
        f'command_step {d.phase.value} {_timeout(d)} "${{HR_{p}_ENV:-}}" "{script}" "${{HR_{p}_SHELL:-}}" '
        f'{logs} {output} "{task}"'
    )
    if d.external:  # a host-side agent: the runner holds the environment while the host acts on it
        body += [
            'if [ -n "${HR_AGENT_EXTERNAL:-}" ]; then',
            f'  external_step {d.phase.value} {_timeout(d)} {logs} "{task}"',
            "else",
            f"  {run}",
            "fi",
        ]
    else:
        body.append(run)
    return body


def _script(d: PhaseDef) -> list[str]:
    call = f"script_{_word(d.script)} {_timeout(d)}"
    return [f"{call} || return 0"] if d.optional else [call]


_OPS = {
    Op.COMMAND: _command,
    Op.SCRIPT: _script,
    Op.STOP: lambda d: ["stop_agent"],
    Op.HANDOVER: lambda d: ["take_tests"],
    Op.READ_REWARD: lambda d: [f"read_reward {' '.join(_word(f) for f in phases.REWARD_FILES)}"],
}


def _endings(d: PhaseDef) -> list[str]:
    out = []
    for e in d.ends:
        word = _word(e.word)
        if d.op is Op.SCRIPT:  # the script's status word
            if "!ok" in e.on:
                test = '[ "$STATUS" != ok ]'
            else:
                test = " || ".join(f'[ "$STATUS" = {_word(s)} ]' for s in e.on)
        else:  # the step's failures, as the runner saw them
            kinds = " ".join(Failure(k).value for k in e.on)
            test = f"failed {(e.step or d.phase).value} {kinds}"
        out.append(f"if {test}; then skip={word}; fi")
    if d.durable:  # written out now: the next phase may end the container
        out.append("flush")
    elif d.ends and d.phase in agent_side:  # the agent's container's message, when the try ends here
        out.append('if [ -n "$skip" ]; then flush; fi')
    return out


def function(d: PhaseDef) -> str:
    """One phase as a sh function."""
    lines = [*_OPS[d.op](d), *_endings(d)]
    return f"phase_{d.phase.value}() {{\n" + "".join(f"  {line}\n" for line in lines) + "}\n"


def render() -> str:
    """Every phase of the definition, in order."""
    return "".join(function(d) for d in phases.DEFINITION)
