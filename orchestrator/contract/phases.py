"""The phases of one try, defined once, as data: every backend runs this definition.

:data:`DEFINITION` says, for each phase in order, what it runs and as whom, where its time bound
comes from, what it records, and which failures end the try with which word. Two things read it
and nothing else decides a phase's shape:

* :func:`orchestrator.contract.sequence.run_try` (local, Docker) iterates it through a
  :class:`~orchestrator.contract.runner.StepRunner`;
* the Pod runner's phases are generated from it (:mod:`orchestrator.backends.kubernetes.phase_sh`),
  as POSIX sh: a task image needs no Python. What the Pod runner still writes by hand is its own
  step runner (run a command under a watchdog, sweep the container, take the tests from the
  warden, the termination message), never a phase.

=================  =====================================================================
phase              what happens
=================  =====================================================================
``agent_setup``    optional: install the agent into the environment (own timeout, own
                   network setting); a failure is ``infra_error(agent_setup_failed)``
``agent_check``    headroom's own check, in the environment, that the agent command's program
                   resolves (:mod:`.agent_check`); if not: ``harness_error(agent_not_found)``
                   and the agent never starts
``agent``          the agent: a command in the environment, or a host-side agent that
                   acts through the step runner's :meth:`~.runner.StepRunner.run`
``stop``           every process the agent started is ended (from outside the environment);
                   the agent's self-report is read; a timed-out, OOM-killed or unstarted agent
                   ends the try here
``handover``       a fresh, empty verifier-logs dir; the tests copied in
``sanitise``       the sanitiser script runs in the verifier's own view, as its user; anything
                   but ``ok`` is ``failed(unjudged_state)``, except a verdict the runtime lost
                   (exit 0, none received): ``infra_error(api_error)``
``verifier``       the task's verifier, in the verifier environment (:mod:`.verifier_env`)
``reward``         the reward read from the verifier's logs
=================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from orchestrator.contract import agent_check, sanitiser
from orchestrator.contract import paths as cc


class Phase(StrEnum):
    AGENT_SETUP = "agent_setup"
    AGENT_CHECK = "agent_check"
    AGENT = "agent"
    STOP = "stop"
    HANDOVER = "handover"
    SANITISE = "sanitise"
    VERIFIER = "verifier"
    REWARD = "reward"


class Op(StrEnum):
    """What a phase asks of the environment (a :class:`~.runner.StepRunner` operation, or the Pod runner's own)."""

    #: run one of the launch's commands (setup, agent, verifier) as the phase's role
    COMMAND = "command"
    #: run one of headroom's own scripts (:attr:`PhaseDef.script`) and judge its ``status``
    SCRIPT = "script"
    #: end every process in the environment, from outside it, and read what the agent left
    STOP = "stop"
    #: put the verifier's trees in (the tests, fresh verifier logs)
    HANDOVER = "handover"
    #: read the first reward file present (:data:`~.paths.REWARD_FILES`)
    READ_REWARD = "read_reward"


class Failure(StrEnum):
    """How a step can fail, as the step runner saw it (its own spawn error, its clock, the kernel's OOM counter, the
    exit status): never from what the step printed."""

    SPAWN = "spawn_error"
    TIMEOUT = "timeout"
    OOM = "oom"
    #: a non-zero exit, or a signal
    EXIT = "exit"


@dataclass(frozen=True)
class Ending:
    """A try ends after this phase when ``step`` failed in one of the ways ``on`` names (:class:`Failure` values), or
    when the phase's script said one of them (a status word; ``!ok``: anything but ``ok``). ``word`` names the ending
    (the Pod runner's ``verifier_skipped=``); ``outcome`` is what it settles as."""

    on: tuple[str, ...]
    word: str
    outcome: str
    step: Phase | None = None  # the step whose facts are judged (None: the phase's own)


@dataclass(frozen=True)
class Timeout:
    """A phase's time bound: headroom's own for its own script (``seconds``), or the launch's for a command
    (``launch``: the step's ``timeout_s``; the Pod's ``HR_<PREFIX>_TIMEOUT``, :data:`DEFAULT_S` if unset)."""

    seconds: float | None = None
    launch: bool = False


#: The Pod runner's bound for a launch command whose variable is missing (never in a pod headroom builds).
DEFAULT_S = 600


@dataclass(frozen=True)
class PhaseDef:
    phase: Phase
    op: Op
    #: whose user and view it runs in (``None``: headroom's own, from outside the step's view)
    role: Literal["agent", "verifier"] | None
    timeout: Timeout | None = None
    #: skipped (not failed) when the try has no such command (no setup; no agent program to check)
    optional: bool = False
    #: the launch command's Pod variables: ``HR_<prefix>_{ENV,TIMEOUT,SCRIPT,SHELL}`` (:attr:`Op.COMMAND`)
    pod_prefix: str | None = None
    #: the contract logs dir the command sees (``HEADROOM_LOGS_DIR``: ``/logs/<logs>``) and where its output goes
    logs: str | None = None
    output: str | None = None
    #: the script a verifier runs when the task names none (the Harbor layout's)
    default_script: str | None = None
    #: a host-side agent may take this phase (it acts through the runner's ``run`` instead of a command)
    external: bool = False
    #: headroom's own script (:attr:`Op.SCRIPT`)
    script: Literal["agent_check", "sanitise"] | None = None
    #: what ends the try after this phase, in order (a later match takes precedence in the Pod's word)
    ends: tuple[Ending, ...] = ()
    #: the backend is asked after this phase whether to go on (a cancel, a limit it watches)
    checkpoint: bool = False
    #: its facts must outlive an environment killed during the next phase (the setup's, should the agent's step be
    #: OOM-killed): a backend that keeps facts inside the environment (the Pod's message) writes them out at once
    durable: bool = False
    #: what a runner fault (:class:`~orchestrator.errors.Tainted`) in this phase is blamed on
    tainted: str | None = None
    #: the facts it records (``TrialFacts`` fields and ``extra`` keys): documentation a test holds to the code
    records: tuple[str, ...] = ()


#: The one definition. The order is the order every backend runs: a phase that does not apply (no setup, a
#: skipped verifier) is skipped, never reordered: the tests exist in the environment only after ``stop``, the
#: verifier runs only after ``sanitise``.
DEFINITION: tuple[PhaseDef, ...] = (
    PhaseDef(
        Phase.AGENT_SETUP,
        Op.COMMAND,
        "agent",
        Timeout(launch=True),
        optional=True,
        pod_prefix="SETUP",
        logs="agent",
        output="agent_setup",
        durable=True,
        ends=(Ending(tuple(Failure), "agent_setup_failed", "infra_error(agent_setup_failed)"),),
        records=("extra.agent_setup", "infra_hint"),
    ),
    PhaseDef(
        Phase.AGENT_CHECK,
        Op.SCRIPT,
        "agent",
        Timeout(seconds=agent_check.TIMEOUT_S),
        optional=True,
        script="agent_check",
        ends=(Ending(("not_found",), "agent_not_found", "harness_error(agent_not_found)"),),
        records=("extra.agent_check", "agent_unresolved"),
    ),
    PhaseDef(
        Phase.AGENT,
        Op.COMMAND,
        "agent",
        Timeout(launch=True),
        pod_prefix="AGENT",
        logs="agent",
        output="agent",
        external=True,
        records=("agent",),
    ),
    PhaseDef(
        Phase.STOP,
        Op.STOP,
        None,
        ends=(
            Ending((Failure.SPAWN,), "agent_spawn_error", "the agent's own failure", step=Phase.AGENT),
            Ending((Failure.TIMEOUT,), "agent_timeout", "failed(agent_timeout)", step=Phase.AGENT),
            Ending((Failure.OOM,), "agent_oom", "failed(agent_oom)", step=Phase.AGENT),
        ),
        checkpoint=True,
        tainted="after the agent",
        records=("agent_result",),
    ),
    PhaseDef(Phase.HANDOVER, Op.HANDOVER, None, checkpoint=True, tainted="before the verifier"),
    PhaseDef(
        Phase.SANITISE,
        Op.SCRIPT,
        "verifier",
        Timeout(seconds=sanitiser.TIMEOUT_S),
        script="sanitise",
        ends=(Ending(("!ok",), "unjudged_state", "failed(unjudged_state)"),),
        checkpoint=True,
        tainted="before the verifier",
        records=("extra.sanitiser", "extra.verifier_only_links_removed"),
    ),
    PhaseDef(
        Phase.VERIFIER,
        Op.COMMAND,
        "verifier",
        Timeout(launch=True),
        pod_prefix="VERIFIER",
        logs="verifier",
        output="verifier",
        default_script="tests/test.sh",
        tainted="before the verifier",
        records=("verifier", "verifier_on_agent_state"),
    ),
    PhaseDef(Phase.REWARD, Op.READ_REWARD, None, records=("reward", "reward_error")),
)

#: The phases in order.
PHASES: tuple[Phase, ...] = tuple(d.phase for d in DEFINITION)
#: Where the reward phase looks, in order.
REWARD_FILES: tuple[str, ...] = cc.REWARD_FILES


def get(phase: Phase) -> PhaseDef:
    """The definition of one phase."""
    return next(d for d in DEFINITION if d.phase is phase)


def failed_as(exit_code: int | None, *, spawn: bool, timed_out: bool, oom: bool, signal: bool) -> set[Failure]:
    """The :class:`Failure` kinds one step's facts show (the Pod runner's ``failed`` is the same test in sh)."""
    kinds = {k for k, seen in ((Failure.SPAWN, spawn), (Failure.TIMEOUT, timed_out), (Failure.OOM, oom)) if seen}
    if signal or exit_code not in (0, None):
        kinds.add(Failure.EXIT)
    return kinds


def ending(d: PhaseDef, failures: set[Failure] | None = None, status: str | None = None) -> Ending | None:
    """The ending that applies after phase ``d`` (the last that matches, as in the Pod runner), or None."""
    found = None
    for e in d.ends:
        if status is not None and (status in e.on or ("!ok" in e.on and status != "ok")):
            found = e
        elif failures is not None and failures.intersection(e.on):
            found = e
    return found


def ending_words(phases: Sequence[Phase]) -> tuple[str, ...]:
    """The words that can end a try in ``phases``, once each, in order."""
    words: dict[str, None] = {}
    for d in DEFINITION:
        if d.phase in phases:
            words.update((e.word, None) for e in d.ends)
    return tuple(words)


def shell_list() -> str:
    """The phase list as one line of words (the Pod runner's two halves, joined)."""
    return " ".join(p.value for p in PHASES)
