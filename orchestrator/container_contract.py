"""Harbor's in-container contract: the fixed paths every container backend gives a try.

Terminal-Bench 2 / Harbor tasks are written against these absolute paths
(``bash /tests/test.sh``, ``echo 1 > /logs/verifier/reward.txt``), so a container
backend must put things exactly here. The Docker backend and the Pod backend
share these names; docs/container-contract.md says what headroom follows and
where it deliberately differs.

* :data:`TESTS_DIR` appears only for the verifier, after every agent process
  has been killed, and is emptied first (nothing the agent left there counts).
* :data:`VERIFIER_LOGS_DIR` is emptied before the verifier runs; the reward is
  read from ``reward.txt`` / ``reward.json`` there (:data:`REWARD_FILES`).
* :data:`AGENT_LOGS_DIR` is the agent's, and holds its optional self-report
  (:data:`AGENT_RESULT_FILE`).
* :data:`SOLUTION_DIR` is present for the oracle only.
* Both steps run in the image's WORKDIR (``/`` when the image sets none).
"""

from __future__ import annotations

from orchestrator.trial_outputs import REWARD_FILES

LOGS_DIR = "/logs"
AGENT_LOGS_DIR = "/logs/agent"
VERIFIER_LOGS_DIR = "/logs/verifier"
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
#: The agent's optional self-report (tokens, cost, model), parsed by trial_outputs.parse_agent_result.
AGENT_RESULT_FILE = f"{AGENT_LOGS_DIR}/result.json"
#: headroom's own additions (Harbor hands the instruction to its agent adapter instead).
HEADROOM_DIR = "/headroom"
INSTRUCTION_FILE = f"{HEADROOM_DIR}/instruction.md"
#: The image's WORKDIR when it sets none.
DEFAULT_WORKDIR = "/"
#: Task-directory folders and where they appear in the container.
TASK_FOLDERS = {"tests": TESTS_DIR, "solution": SOLUTION_DIR}

__all__ = [
    "AGENT_LOGS_DIR", "AGENT_RESULT_FILE", "DEFAULT_WORKDIR", "HEADROOM_DIR", "INSTRUCTION_FILE", "LOGS_DIR",
    "REWARD_FILES", "SOLUTION_DIR", "TASK_FOLDERS", "TESTS_DIR", "VERIFIER_LOGS_DIR", "container_path",
]


def container_path(script: str) -> str:
    """A step's script, given relative to the task directory, as the container sees it.

    ``solution/solve.sh`` -> ``/solution/solve.sh``, ``tests/test.sh`` -> ``/tests/test.sh``.
    """
    head, _, rest = script.partition("/")
    if head not in TASK_FOLDERS or not rest:
        raise ValueError(f"step script {script!r} is not under tests/ or solution/")
    return f"{TASK_FOLDERS[head]}/{rest}"
