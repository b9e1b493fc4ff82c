"""Task sets in the cluster as content-addressed ConfigMaps (`headroom tasks push DIR`).

* one ConfigMap per task, named by the task's content digest (``headroom-task-<digest>``),
  holding every file of the task directory; keys are flattened paths and ``_files.json``
  maps each key back to its path and mode, so a pod can mount it with ``items``;
* one index ConfigMap per task set (``headroom-tasks-<digest of the set>``) listing the
  tasks, their digests and their bundles. An Experiment names the index.

Both are immutable and named by content, so pushing twice is a no-op, two task sets
share the bundles of tasks they have in common, and a bundle can never change under a
running Experiment. The controller unpacks a set into a scratch folder and loads it with
the same loader as a local run, then checks every digest against the index.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from orchestrator.controller.resources import LABEL_TASK_BUNDLE, LABEL_TASK_SET
from orchestrator.errors import SpecError, UserError
from orchestrator.spec.task import Task
from orchestrator.tasks.loader import load_tasks

MANIFEST_KEY = "_files.json"
INDEX_KEY = "tasks.json"
#: A ConfigMap may hold at most 1 MiB (the API server's limit); keep room for metadata.
BUNDLE_LIMIT_BYTES = 1024 * 1024 - 16 * 1024
_KEY_UNSAFE = re.compile(r"[^-._a-zA-Z0-9]")


def bundle_name(digest: str) -> str:
    return f"headroom-task-{digest[:20]}"


def set_digest(tasks: list[Task]) -> str:
    h = hashlib.sha256()
    for t in sorted(tasks, key=lambda t: t.id):
        h.update(f"{t.id}\0{t.digest}\n".encode())
    return h.hexdigest()


def set_name(digest: str) -> str:
    return f"headroom-tasks-{digest[:20]}"


def bundle_body(task: Task) -> dict[str, Any]:
    """The ConfigMap for one task directory; raises SpecError when it cannot fit."""
    root = Path(task.path)
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    files: dict[str, dict[str, Any]] = {}
    size = 0
    for f in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = f.relative_to(root).as_posix()
        key = _KEY_UNSAFE.sub("_", rel.replace("/", "."))
        while key in files or key in (MANIFEST_KEY,):
            key = f"_{key}"
        raw = f.read_bytes()
        size += len(raw) + len(key)
        try:
            data[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(raw).decode()
            size += len(raw) // 3
        files[key] = {"path": rel, "mode": 0o755 if f.stat().st_mode & 0o111 else 0o644}
    data[MANIFEST_KEY] = json.dumps(files, sort_keys=True)
    size += len(data[MANIFEST_KEY])
    if size > BUNDLE_LIMIT_BYTES:
        raise SpecError(
            f"task is {size / 1024:.0f} KiB, more than a ConfigMap holds ({BUNDLE_LIMIT_BYTES // 1024} KiB); "
            "ship it in an image instead (task_source.image)",
            file=task.path,
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bundle_name(task.digest),
            "labels": {LABEL_TASK_BUNDLE: task.digest[:20], "app.kubernetes.io/part-of": "headroom"},
            "annotations": {"headroom.dev/task-id": task.id, "headroom.dev/task-digest": task.digest},
        },
        "immutable": True,
        "data": data,
        **({"binaryData": binary} if binary else {}),
    }


def index_body(tasks: list[Task]) -> dict[str, Any]:
    digest = set_digest(tasks)
    index = {t.id: {"digest": t.digest, "bundle": bundle_name(t.digest)} for t in sorted(tasks, key=lambda t: t.id)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": set_name(digest),
            "labels": {LABEL_TASK_SET: digest[:20], "app.kubernetes.io/part-of": "headroom"},
            "annotations": {"headroom.dev/task-set-digest": digest},
        },
        "immutable": True,
        "data": {INDEX_KEY: json.dumps(index, sort_keys=True)},
    }


@dataclass
class PushResult:
    name: str
    created: int
    existing: int
    tasks: int


def push(core: client.CoreV1Api, namespace: str, tasks_dir: Path) -> PushResult:
    """Create the bundles and the index (idempotent: existing content-addressed objects are kept)."""
    tasks = load_tasks(tasks_dir)
    bodies = [bundle_body(t) for t in tasks]  # every size check before anything is written
    created = existing = 0
    for body in [*bodies, index_body(tasks)]:
        try:
            core.create_namespaced_config_map(namespace, body)
            created += 1
        except ApiException as exc:
            if exc.status != 409:
                raise UserError(f"cannot create ConfigMap {body['metadata']['name']} in {namespace}: "
                                f"{exc.status} {exc.reason}") from None
            existing += 1
    return PushResult(set_name(set_digest(tasks)), created, existing, len(tasks))


def read_index(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, dict[str, str]]:
    try:
        cm = core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            raise SpecError(f"no task set ConfigMap {name!r} in {namespace} (push it with `headroom tasks push DIR`)",
                            field="task_source.bundle") from None
        raise
    try:
        return json.loads((cm.data or {})[INDEX_KEY])
    except (KeyError, ValueError):
        raise SpecError(f"ConfigMap {name!r} is not a headroom task set", field="task_source.bundle") from None


def unpack(core: client.CoreV1Api, namespace: str, name: str, into: Path) -> Path:
    """Write the task set ``name`` under ``into/<name>/`` and return that folder."""
    index = read_index(core, namespace, name)
    root = into / name
    if root.is_dir():
        return root
    into.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=into))
    try:
        for task_id, entry in index.items():
            cm = core.read_namespaced_config_map(entry["bundle"], namespace)
            data, binary = cm.data or {}, cm.binary_data or {}
            files = json.loads(data[MANIFEST_KEY])
            for key, meta in files.items():
                target = tmp / task_id / meta["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                if key in binary:
                    target.write_bytes(base64.b64decode(binary[key]))
                else:
                    target.write_text(data[key], encoding="utf-8")
                target.chmod(int(meta["mode"]))
        tmp.rename(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def load_set(core: client.CoreV1Api, namespace: str, name: str, scratch: Path,
             select: list[str] | None = None) -> list[Task]:
    """The tasks of a pushed set, loaded by the engine's loader and checked against their digests."""
    root = unpack(core, namespace, name, scratch)
    index = read_index(core, namespace, name)
    tasks = load_tasks(root, select)
    for t in tasks:
        if index[t.id]["digest"] != t.digest:
            raise SpecError(f"task {t.id!r} in {name!r} does not match its recorded digest", field="task_source.bundle")
    return tasks
