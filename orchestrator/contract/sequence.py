"""The one step sequence of a try, written against :class:`~.runner.StepRunner` alone.

The local and Docker backends build a :class:`Plan` and a runner and call :func:`run_try`,
which walks :data:`~.phases.DEFINITION` (the Pod runner's phases are generated from the same
definition). What each phase does, its time bound and what ends the try after it are in
:mod:`.phases`; here is only how each is carried out through a :class:`~.runner.StepRunner`;
why, in docs/container-contract.md.

Verdict channels: every fact this writes comes from the runner (its own spawn errors,
timeouts, kernel OOM counters) or from files the verifier wrote after the agent was gone.
The agent's exit code and output are recorded, never read for a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from orchestrator.contract import agent_check, phases, sanitiser, verifier_env
from orchestrator.contract import paths as cc
from orchestrator.contract.outputs import MAX_READ, parse_agent_result, parse_reward
from orchestrator.contract.phases import Failure, Phase, PhaseDef
from orchestrator.contract.runner import HostWalk, StepRunner
from orchestrator.errors import NotRegular, Tainted
from orchestrator.spec.evidence import AgentSetup
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.outcome import InfraReason


@dataclass(frozen=True)
class Command:
    """A command the sequence runs in the environment."""

    argv: Sequence[str]
    env: Mapping[str, str]
    timeout_s: float


@dataclass(frozen=True)
class SetupCommand(Command):
    """The optional agent install: its own timeout, and its own network setting (a package index, say)."""

    network: bool = False


class Exec(Protocol):
    """What a host-side agent is given: :meth:`StepRunner.run` bound to the agent's role and work dir."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout_s: float,
        stdin: bytes | None = None,
        cwd: str | None = None,
    ) -> StepFacts: ...


#: A host-side agent: runs its loop on the host, acting in the environment only through ``Exec``; returns the
#: agent step's facts (its own exit status, timeout, spawn error: the host process's, not a command's).
ExternalAgent = Callable[[Exec], StepFacts]
#: A host-side agent's install step (a Harbor installed agent's ``setup``), as the agent_setup phase: the same shape.
ExternalSetup = Callable[[Exec], StepFacts]


@dataclass
class Plan:
    """What one try runs, in the environment's own paths."""

    workdir: str
    agent: Command | ExternalAgent
    verifier: Command | None  # None: a golden task; its grader judges the answer when the try settles
    #: (host tree or None for an empty folder, path in the environment), put in the handover phase in this order
    handover: list[tuple[Path | None, str]]
    hidden: list[str]  # verifier-only paths as the verifier sees them
    roots: list[str]  # what the agent could write that the verifier sees
    prune: list[str] = field(default_factory=list)  # never searched by the sanitiser (read-only system folders)
    setup: SetupCommand | ExternalSetup | None = None
    #: what the agent_check phase resolves before the agent runs (:func:`.agent_check.target`): the command's
    #: program word and, for an interpreter (``python3 agent.py``), its script word, so a try refuses what the
    #: sweep's preflight refuses; None: a host-side agent, a task script, or a command whose program cannot be
    #: told without running it
    agent_target: agent_check.Target | None = None
    agent_result: str = cc.AGENT_RESULT
    verifier_logs: str = cc.VERIFIER_LOGS
    sanitiser_max_links: int = sanitiser.MAX_LINKS
    #: a folder of the verifier's own view, made by the hand-over, that nothing of the agent's can reach (the
    #: verifier's fresh container): the sanitiser writes a copy of its verdict there, read only when the runtime
    #: loses the script's output (a loaded Docker daemon has closed an exec's stream without it). None: a runtime
    #: that does not lose output (a pipe), or no such folder.
    verdict_dir: str | None = None


def _bound_exec(runner: StepRunner, workdir: str, base_env: Mapping[str, str]) -> Exec:
    def exec_(
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout_s: float,
        stdin: bytes | None = None,
        cwd: str | None = None,
    ) -> StepFacts:
        return runner.run(
            argv,
            role="agent",
            name="agent-exec",
            cwd=cwd or workdir,
            env={**base_env, **(env or {})},
            timeout_s=timeout_s,
            stdin=stdin,
        )

    return exec_


def _failed_step(s: StepFacts) -> str | None:
    if s.spawn_error:
        return s.spawn_error
    if s.timed_out:
        return "timed out"
    if s.oom_kills:
        return f"OOM-killed ({s.oom_evidence})"
    if s.signal is not None:
        return f"killed by signal {s.signal}"
    if s.exit_code not in (0, None):
        return f"exit {s.exit_code}"
    return None


#: Why a step failed (None: it did not), as the agent_setup phase reads its step: public for the Pod backend's
#: host-side install step, which runs outside this sequence.
failed_step = _failed_step


@dataclass
class _Try:
    runner: StepRunner
    plan: Plan
    facts: TrialFacts
    agent_env: Mapping[str, str]


def _failures(s: StepFacts) -> set[Failure]:
    return phases.failed_as(
        s.exit_code,
        spawn=bool(s.spawn_error),
        timed_out=s.timed_out,
        oom=bool(s.oom_kills),
        signal=s.signal is not None,
    )


def _timeout(d: PhaseDef, launch: Command) -> float:
    assert d.timeout is not None
    return launch.timeout_s if d.timeout.launch else float(d.timeout.seconds or 0)


def _agent_setup(t: _Try, d: PhaseDef) -> bool:
    plan, facts = t.plan, t.facts
    if plan.setup is None:
        return True
    if isinstance(plan.setup, SetupCommand):
        s = t.runner.run(
            plan.setup.argv,
            role="agent",
            name=d.phase,
            cwd=plan.workdir,
            env=plan.setup.env,
            timeout_s=_timeout(d, plan.setup),
            network=plan.setup.network,
        )
    else:  # a host-side agent's install step (a Harbor installed agent's setup): it bounds its own time
        s = plan.setup(_bound_exec(t.runner, plan.workdir, t.agent_env))
    facts.extra.agent_setup = AgentSetup(
        exit_code=s.exit_code, duration_s=round(s.duration_s, 3), timed_out=s.timed_out
    )
    if (end := phases.ending(d, _failures(s))) is not None:
        facts.infra_hint = InfraReason(end.word)
        facts.infra_detail = f"agent setup failed: {_failed_step(s)}; {s.stderr_tail[-500:]}".strip()
        t.runner.stop_all()
        return False
    return True


def _agent_check(t: _Try, d: PhaseDef) -> bool:
    plan, facts = t.plan, t.facts
    if not isinstance(plan.agent, Command) or (target := plan.agent_target) is None:
        return True
    ran = t.runner.run(
        agent_check.argv(target.program, script=target.script),
        role="agent",
        name=d.phase,
        cwd=plan.workdir,
        env=plan.agent.env,
        timeout_s=_timeout(d, plan.agent),
    )
    check = agent_check.parse(
        ran.stdout_tail, exit_code=ran.exit_code, timed_out=ran.timed_out, spawn_error=ran.spawn_error
    )
    facts.extra.agent_check = check.evidence(target.program)
    if phases.ending(d, status=check.status) is not None:  # headroom's own answer, before the agent had control
        facts.agent_unresolved = check.detail or f"{target.program}: not found"
        facts.agent = StepFacts(name="agent", skipped=f"agent_not_found: {facts.agent_unresolved}")
        t.runner.stop_all()
        return False
    return True


def _agent(t: _Try, d: PhaseDef) -> bool:
    plan = t.plan
    if isinstance(plan.agent, Command):
        t.facts.agent = t.runner.run(
            plan.agent.argv,
            role="agent",
            name=d.phase,
            cwd=plan.workdir,
            env=plan.agent.env,
            timeout_s=_timeout(d, plan.agent),
        )
    else:
        t.facts.agent = plan.agent(_bound_exec(t.runner, plan.workdir, t.agent_env))
    return True


def _stop(t: _Try, d: PhaseDef) -> bool:
    facts = t.facts
    t.runner.stop_all()
    try:
        raw = t.runner.read_file(t.plan.agent_result, MAX_READ)
    except NotRegular:
        raw = None
    facts.agent_result = parse_agent_result(raw.decode("utf-8", "replace")) if raw else {}
    assert facts.agent is not None
    return phases.ending(d, _failures(facts.agent)) is None


def _handover(t: _Try, d: PhaseDef) -> bool:
    if t.plan.verifier is None:
        t.facts.verifier = StepFacts(name="verifier", skipped="no tests/: a golden task, its grader decides")
        return False
    for src, dest in t.plan.handover:
        t.runner.put_tree(src, dest)
    return True


def _sanitise(t: _Try, d: PhaseDef) -> bool:
    runner, plan, facts = t.runner, t.plan, t.facts
    # A tree holding nothing the script would act on (no link, special file or permission to fix: nearly
    # every honest one) gets the script's own `ok` from a host walk, some 30 processes fewer (issue 32).
    walked = time.monotonic()
    if isinstance(runner, HostWalk) and runner.nothing_to_sanitise(plan.roots, [*plan.hidden, *plan.prune]):
        report, took = sanitiser.nothing_judged(len(plan.roots)), time.monotonic() - walked
    else:
        assert d.timeout is not None
        copy = f"{plan.verdict_dir}/verdict" if plan.verdict_dir else None
        s = runner.run(
            sanitiser.argv(plan.roots),
            role="verifier",
            name=d.phase,
            cwd="/",
            env=sanitiser.env(plan.hidden, plan.prune, plan.sanitiser_max_links, verdict=copy),
            timeout_s=float(d.timeout.seconds or 0),
        )
        if s.spawn_error:  # the runner's own verdict: nothing of the agent's can stop a shell from starting
            facts.infra_hint, facts.infra_detail = InfraReason.SPAWN_FAILED, f"sanitiser: {s.spawn_error}"
            return False
        report, took = sanitiser.parse(s.stdout_tail, s.exit_code, s.timed_out), s.duration_s
        if report.lost and copy is not None:
            report = _verdict_copy(runner, copy) or report
    facts.extra.sanitiser = san = report.evidence(round(took, 3))
    if report.lost:  # the runtime's failure, not the agent's: the script exits 0 only once its verdict is written
        facts.infra_hint = InfraReason.API_ERROR
        facts.infra_detail = (
            "sanitiser: it exited 0 and its verdict never reached headroom (the runtime lost its output)"
        )
        return False
    # the same key on every backend: how many agent-made links the verifier will not follow
    facts.extra.verifier_only_links_removed = (
        (san.links_removed or 0) + (san.links_unjudged or 0) + (san.roots_replaced or 0)
    )
    if phases.ending(d, status=report.status) is not None:
        facts.agent_fault = f"the sanitiser could not judge what the agent left: {report.status} {report.detail}"
        return False
    return True


def _verdict_copy(runner: StepRunner, path: str) -> sanitiser.Report | None:
    try:
        raw = runner.read_file(path, sanitiser.VERDICT_LIMIT)
    except Exception:  # noqa: BLE001 -- a runtime that lost the output may fail this read too: the verdict stays lost
        return None
    return sanitiser.recovered(raw)


def _verifier(t: _Try, d: PhaseDef) -> bool:
    plan, facts = t.plan, t.facts
    v = plan.verifier
    assert v is not None
    facts.verifier_on_agent_state = True
    facts.verifier = t.runner.run(
        verifier_env.wrap(v.argv),
        role="verifier",
        name=d.phase,
        cwd=plan.workdir,
        env=verifier_env.build(v.env, {}, plan.roots),
        timeout_s=_timeout(d, v),
    )
    return True


def _reward(t: _Try, d: PhaseDef) -> bool:
    facts = t.facts
    facts.reward, facts.reward_error = None, "missing: no reward.txt or reward.json"
    for name in phases.REWARD_FILES:
        try:
            raw = t.runner.read_file(f"{t.plan.verifier_logs}/{name}", MAX_READ)
        except NotRegular as exc:
            facts.reward, facts.reward_error = None, f"malformed: {name} is {exc}"
            break
        if raw is not None:
            facts.reward, facts.reward_error = parse_reward(name, raw.decode("utf-8", "replace"))
            break
    return True


#: Each phase of :data:`~.phases.DEFINITION` through a :class:`StepRunner`; True: the try goes on.
HANDLERS: dict[Phase, Callable[[_Try, PhaseDef], bool]] = {
    Phase.AGENT_SETUP: _agent_setup,
    Phase.AGENT_CHECK: _agent_check,
    Phase.AGENT: _agent,
    Phase.STOP: _stop,
    Phase.HANDOVER: _handover,
    Phase.SANITISE: _sanitise,
    Phase.VERIFIER: _verifier,
    Phase.REWARD: _reward,
}


def run_try(
    runner: StepRunner,
    plan: Plan,
    facts: TrialFacts,
    *,
    proceed: Callable[[Phase], bool] = lambda phase: True,
    agent_env: Mapping[str, str] | None = None,
) -> None:
    """Run every phase of :data:`~.phases.DEFINITION`, in order, through ``runner``, recording into ``facts``.

    ``proceed(phase)`` is asked after each checkpoint phase (``stop``, ``handover``, ``sanitise``): a backend says
    no when the try was cancelled or went over a limit it watches (the facts already say so).
    """
    t = _Try(runner, plan, facts, agent_env or {})
    for d in phases.DEFINITION:
        try:
            go_on = HANDLERS[d.phase](t, d)
        except Tainted as exc:
            if d.tainted is None:
                raise
            facts.agent_fault = f"{d.tainted}: {exc}"
            return
        if not go_on or (d.checkpoint and not proceed(d.phase)):
            return
