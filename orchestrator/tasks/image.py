"""A task set as a container image: the layout headroom defines, and the build context it writes.

Layout (read by the controller and by trial pods; nothing else in the image matters)::

    /headroom-tasks/catalog.json     what the controller plans from (see :func:`catalog`)
    /headroom-tasks/<task id>/...    the task directory, byte for byte but task.toml, which is the
                                     agent's view (tasks/agent_view.py: no grader, verifier or oracle secrets)

The catalog holds, per task, its content digest (the loader's, so a trial's digest is the
same as a local run's over the same folder), its ``task.toml`` and instruction, the
manifest of its tests (what the in-pod runner checks the delivered tests against), the
image its ``environment/Dockerfile`` builds to, its file list, and what it needs from a backend
(``tasks/needs.py``, read from all its files: the controller's faithful check sees only the catalog). The controller reads
only the catalog (from a short pod's log); trial pods copy their task's folder with an
init container. The image needs ``/bin/sh`` and ``cp`` (and ``cat`` for the catalog):
any Debian-like base works, e.g. the project's ``headroom.local/debian-base``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from orchestrator.errors import SpecError
from orchestrator.spec.task import Task
from orchestrator.tasks import agent_view
from orchestrator.tasks.environment_image import built_image_ref
from orchestrator.tasks.files import TaskBundle, read_files
from orchestrator.tasks.loader import load_tasks
from orchestrator.tasks.needs import as_records, task_needs

ROOT = "/headroom-tasks"
CATALOG = f"{ROOT}/catalog.json"
FORMAT = 1
#: Where the controller keeps a task's tests manifest from the catalog, next to the task's metadata
#: in its scratch folder; the Pod backend reads it there for trial pods (see tests_manifest_of).
TESTS_MANIFEST_FILE = ".headroom-tests-manifest"


def tests_manifest_of(task_path: str) -> str:
    return (Path(task_path) / TESTS_MANIFEST_FILE).read_text()


def task_entry(task: Task) -> dict[str, Any]:
    files = read_files(task.path)
    root = Path(task.path)
    return {
        "digest": task.digest,
        "task_toml": (root / "task.toml").read_text(encoding="utf-8"),
        "instruction": task.instruction,
        "has_tests": task.has_tests,
        "tests_manifest": TaskBundle(task.id, task.digest, files).tests_manifest(),
        "built_image": built_image_ref(task.id, task.path),
        "files": [f.path for f in files],
        # what the task needs from a backend, read from all its files: the controller sees only this catalog
        "needs": as_records(task_needs(task)),
    }


def catalog(tasks: list[Task]) -> dict[str, Any]:
    from orchestrator.tasks.loader import set_digest

    return {
        "format": FORMAT,
        "set_digest": set_digest(tasks),
        "tasks": {t.id: task_entry(t) for t in sorted(tasks, key=lambda t: t.id)},
    }


def dockerfile(base: str) -> str:
    # COPY keeps the context's modes (made world-readable by write_context) and makes root the
    # owner: trial pods copy the files as a non-root uid. (No --chmod: that needs BuildKit.)
    return f'FROM {base}\nCOPY headroom-tasks/ {ROOT}/\nLABEL dev.headroom.task-set="1"\nCMD ["cat", "{CATALOG}"]\n'


def write_context(tasks_dir: Path, out: Path, base: str) -> dict[str, Any]:
    """Write a Docker build context for the task set under ``tasks_dir`` into ``out``; return its catalog.

    Refuses golden tasks without tests/ (trial pods always run a verifier) before writing anything.
    """
    tasks = load_tasks(tasks_dir)
    if bare := sorted(t.id for t in tasks if not t.has_tests):
        raise SpecError(
            f"golden task(s) without tests/ ({', '.join(bare[:5])}) run on the local backend only",
            field="tests/test.sh",
        )
    if out.exists() and any(out.iterdir()):
        raise SpecError("the output folder is not empty", file=str(out))
    cat = catalog(tasks)
    dest = out / "headroom-tasks"
    dest.mkdir(parents=True)
    for t in tasks:
        for rel in cat["tasks"][t.id]["files"]:
            target = dest / t.id / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            # trial pods copy this folder: task.toml as the agent may read it (the catalog keeps the original)
            target.write_bytes(agent_view.delivered(rel, (Path(t.path) / rel).read_bytes()))
            target.chmod(0o755 if os.access(Path(t.path) / rel, os.X_OK) else 0o644)
    (dest / "catalog.json").write_text(json.dumps(cat, sort_keys=True))
    (dest / "catalog.json").chmod(0o644)
    for d in [dest, *(p for p in dest.rglob("*") if p.is_dir())]:
        d.chmod(0o755)
    (out / "Dockerfile").write_text(dockerfile(base))
    return cat
