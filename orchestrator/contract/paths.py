"""Harbor's in-container contract, shared by every container backend (Pod, Docker).

Where things are inside a trial's container, so a Terminal-Bench / Harbor task
runs unmodified:

* the agent runs with the image's WORKDIR as its working directory and writes
  its logs under :data:`AGENT_LOGS` (``/logs/agent``);
* :data:`SOLUTION` (``/solution``) exists for the ``oracle`` agent only;
* :data:`TESTS` (``/tests``) appears only for the verifier step, after every
  agent process has exited;
* the verifier writes its reward to :data:`VERIFIER_LOGS` (``/logs/verifier``)
  as ``reward.txt`` or ``reward.json`` (parsed by :mod:`orchestrator.contract.outputs`).

headroom's own ``HEADROOM_*`` variables (see :mod:`orchestrator.engine.launch`) point
at the same places, so headroom's bundled tasks and Harbor tasks both work.
"""

from __future__ import annotations

from typing import Final

TESTS: Final = "/tests"
SOLUTION: Final = "/solution"
LOGS: Final = "/logs"
AGENT_LOGS: Final = "/logs/agent"
VERIFIER_LOGS: Final = "/logs/verifier"
#: Where an agent may write ``{"tokens_in", "tokens_out", "cost_usd", "model"}``.
AGENT_RESULT: Final = "/logs/agent/result.json"
#: The task's agent-visible files (instruction, environment, and for the oracle the solution).
TASK_DIR: Final = "/headroom/task"
INSTRUCTION_FILE: Final = "/headroom/task/instruction.md"

#: Paths only the verifier may read (the solution too, unless the agent is the oracle). Before the
#: verifier runs, a symlink the agent left in its work dir or logs that resolves into one of them
#: is removed (a checker reading ``/app/answer`` must not be handed ``/tests/expected.txt``).
VERIFIER_ONLY: Final = (TESTS, VERIFIER_LOGS)


def verifier_only_paths(include_solution: bool) -> tuple[str, ...]:
    """The verifier-only paths of a try: :data:`VERIFIER_ONLY`, plus :data:`SOLUTION` unless the oracle runs."""
    return VERIFIER_ONLY if include_solution else (*VERIFIER_ONLY, SOLUTION)


#: The reward files a verifier may write, in the order they are looked for.
REWARD_FILES: Final = ("reward.txt", "reward.json")


def step_paths(step: str, workdir: str | None = None, task_dir: str = TASK_DIR) -> dict[str, str]:
    """The ``HEADROOM_*`` path variables of one step, pointing at the contract's paths.

    ``workdir`` is the image's WORKDIR when the backend knows it; a runner that
    only learns it at start-up sets ``HEADROOM_WORKDIR`` to its own cwd.
    """
    logs = AGENT_LOGS if step == "agent" else VERIFIER_LOGS
    env = {
        "HEADROOM_LOGS_DIR": logs,
        "HEADROOM_TASK_DIR": task_dir,
        "HEADROOM_INSTRUCTION_FILE": f"{task_dir}/instruction.md",
    }
    if workdir is not None:
        env["HEADROOM_WORKDIR"] = workdir
    if step == "agent":
        env["HEADROOM_AGENT_RESULT"] = AGENT_RESULT
    return env
