"""What of a task's ``task.toml`` the agent may read.

A golden task's ``[grader]`` holds the expected answer, ``[verifier.env]`` often holds it
too (Terminal-Bench 2 tasks pass expected values to their tests that way), and
``[solution]`` belongs to the oracle. The agent reads its task's files, so every backend
delivers this view of ``task.toml`` into the sandbox or container instead of the file
itself: the verifier's and the oracle's variables reach their steps through the
environment headroom sets, and grading runs in headroom, from the original file.
"""

from __future__ import annotations

import tomlkit
from tomlkit.exceptions import TOMLKitError

TASK_TOML = "task.toml"
#: Tables the agent never sees, whole.
HIDDEN_TABLES = ("grader", "solution")
#: Keys of the step tables that only their own step sees.
HIDDEN_STEP_KEYS = {"verifier": ("env",)}


def agent_task_toml(text: str) -> str:
    """``task.toml`` without what only the verifier, the grader or the oracle use; comments and order kept."""
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError:
        return ""  # a task.toml headroom cannot read is not run (the loader refuses it); never pass it through
    for table in HIDDEN_TABLES:
        if table in doc:
            del doc[table]
    for table, keys in HIDDEN_STEP_KEYS.items():
        section = doc.get(table)
        if section is None:
            continue
        for key in keys:
            if key in section:
                del section[key]
    return tomlkit.dumps(doc)


def delivered(rel_path: str, data: bytes) -> bytes:
    """A task file as a sandbox or container receives it (``rel_path`` relative to the task, '/'-separated)."""
    if rel_path == TASK_TOML:
        return agent_task_toml(data.decode("utf-8", "replace")).encode("utf-8")
    return data
