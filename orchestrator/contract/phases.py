"""The phases of one try, in order: the one list every backend runs (the Pod runner's is generated from it).

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
``stop``           every process the agent started is ended (from outside the environment)
``handover``       a fresh, empty verifier-logs dir; the tests copied in
``sanitise``       the sanitiser script runs in the verifier's own view, as its user
``verifier``       the task's verifier, in the verifier environment (:mod:`.verifier_env`)
``reward``         the reward read from the verifier's logs
=================  =====================================================================
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    AGENT_SETUP = "agent_setup"
    AGENT_CHECK = "agent_check"
    AGENT = "agent"
    STOP = "stop"
    HANDOVER = "handover"
    SANITISE = "sanitise"
    VERIFIER = "verifier"
    REWARD = "reward"


#: The order every backend runs them in. A phase that does not apply (no setup, a skipped verifier) is skipped,
#: never reordered: the tests exist in the environment only after ``stop``, the verifier runs only after ``sanitise``.
PHASES: tuple[Phase, ...] = tuple(Phase)


def shell_list() -> str:
    """The phase list as one line of words, for the Pod runner (``runner.sh``'s ``@PHASES@``)."""
    return " ".join(p.value for p in PHASES)
