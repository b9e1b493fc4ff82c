"""Write a task's calibrated band into its ``task.toml``, keeping the file's own layout and comments.

The floor goes into Harbor's ``memory_mb``/``cpus``; the ceiling into headroom's
``memory_limit_mb``/``cpus_limit`` (see :class:`orchestrator.spec.task.EnvironmentSpec`).
tomlkit edits the document in place, so a maintainer's diff shows only the
four numbers and a comment saying where they came from.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import tomlkit

from orchestrator.stats.band_types import TaskBand


def patched_toml(text: str, band: TaskBand, note: str) -> str:
    """``text`` (a task.toml) with the band's floor and ceiling in ``[environment]``."""
    if band.status != "recommended":
        raise ValueError(f"task {band.task_id} has no recommended band")
    doc = tomlkit.parse(text)
    env = doc.get("environment")
    if env is None:
        env = tomlkit.table()
        doc["environment"] = env
    for spelled in ("memory", "memory_limit"):  # Harbor's size strings: replaced by the MiB fields below
        if spelled in env:
            del env[spelled]
    env["cpus"] = band.floor_cpus
    env["memory_mb"] = band.floor_memory_mb
    env["memory_limit_mb"] = band.ceiling_memory_mb
    env["memory_limit_mb"].comment(note)
    env["cpus_limit"] = band.ceiling_cpus
    return tomlkit.dumps(doc)


def unified_patch(task_id: str, before: str, after: str) -> str:
    """A ``git apply``/``patch -p1`` patch, paths relative to the tasks directory."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{task_id}/task.toml",
            tofile=f"b/{task_id}/task.toml",
        )
    )


def read_task_toml(tasks_dir: Path, task_id: str) -> str | None:
    path = tasks_dir / task_id / "task.toml"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
