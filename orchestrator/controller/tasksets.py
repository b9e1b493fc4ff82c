"""Task sets in the cluster as content-addressed ConfigMaps (`headroom tasks push DIR`).

* one ConfigMap per task, named by the task's content digest: exactly the object the Pod
  backend mounts into trial pods (:mod:`orchestrator.tasks.files`), so a
  pushed task is never uploaded twice and its pods mount what was pushed;
* one index ConfigMap per task set (``headroom-tasks-<digest of the set>``) listing the
  tasks, their digests, their bundles, and where each key of a bundle goes (path, mode).
  An Experiment names the index.

Both are immutable and named by content, so pushing twice is a no-op, two task sets
share the bundles of tasks they have in common, and a bundle can never change under a
running Experiment. The controller unpacks a set into a scratch folder, loads it with
the same loader as a local run, and checks every digest against the index.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.backends.kubernetes.pod import MANAGED_BY
from orchestrator.controller.resources import LABEL_TASK_BUNDLE, LABEL_TASK_SET
from orchestrator.errors import SpecError, UserError
from orchestrator.kube.api import ApiException, client
from orchestrator.kube.raw import CoreJson
from orchestrator.spec.task import Task
from orchestrator.tasks import files as taskfiles
from orchestrator.tasks.files import TaskBundle
from orchestrator.tasks.loader import load_tasks, set_digest

INDEX_KEY = "tasks.json"


def set_name(digest: str) -> str:
    return f"headroom-tasks-{digest[:20]}"


def bundles(tasks: list[Task]) -> list[TaskBundle]:
    """The Pod backend's bundle of each task; raises SpecError for a task too big for a ConfigMap,
    or for a golden task without tests/ (the Pod's runner always runs a verifier: local backend only)."""
    if bare := sorted(t.id for t in tasks if not t.has_tests):
        raise SpecError(
            f"golden task(s) without tests/ ({', '.join(bare[:5])}{', ...' if len(bare) > 5 else ''}) run on "
            "the local backend only; the kubernetes backend needs tests/test.sh (it may be `exit 0`)",
            field="tests/test.sh",
        )
    return [taskfiles.bundle(t.id, t.path, t.digest) for t in tasks]


def bundle_body(b: TaskBundle) -> dict[str, Any]:
    return b.configmap({**MANAGED_BY, LABEL_TASK_BUNDLE: b.digest[:20]})


def index_body(tasks: list[Task], made: list[TaskBundle]) -> dict[str, Any]:
    digest = set_digest(tasks)
    by_id = {b.task_id: b for b in made}
    index = {
        t.id: {
            "digest": t.digest,
            "bundle": by_id[t.id].name,
            "files": {f.key: {"path": f.path, "mode": 0o755 if f.executable else 0o644} for f in by_id[t.id].files},
        }
        for t in sorted(tasks, key=lambda t: t.id)
    }
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
    made = bundles(tasks)  # every size check before anything is written
    created = existing = 0
    for body in [*(bundle_body(b) for b in made), index_body(tasks, made)]:
        try:
            core.create_namespaced_config_map(namespace, body)  # type: ignore[arg-type]  # the client serialises a plain dict body
            created += 1
        except ApiException as exc:
            if exc.status != 409:
                raise UserError(
                    f"cannot create ConfigMap {body['metadata']['name']} in {namespace}: {exc.status} {exc.reason}"
                ) from None
            existing += 1
    return PushResult(set_name(set_digest(tasks)), created, existing, len(tasks))


def read_index(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    try:
        cm = CoreJson(core.api_client).read_config_map(namespace, name)  # JSON: no typed core API in the controller
    except ApiException as exc:
        if exc.status == 404:
            raise SpecError(
                f"no task set ConfigMap {name!r} in {namespace} (push it with `headroom tasks push DIR`)",
                field="task_source.bundle",
            ) from None
        raise
    try:
        return json.loads((cm.get("data") or {})[INDEX_KEY])
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
            cm = CoreJson(core.api_client).read_config_map(namespace, entry["bundle"])
            data, binary = cm.get("data") or {}, cm.get("binaryData") or {}
            for key, meta in entry["files"].items():
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


def load_set(
    core: client.CoreV1Api, namespace: str, name: str, scratch: Path, select: list[str] | None = None
) -> list[Task]:
    """The tasks of a pushed set, loaded by the engine's loader and checked against their digests."""
    root = unpack(core, namespace, name, scratch)
    index = read_index(core, namespace, name)
    tasks = load_tasks(root, select)
    for t in tasks:
        if index[t.id]["digest"] != t.digest:
            raise SpecError(f"task {t.id!r} in {name!r} does not match its recorded digest", field="task_source.bundle")
    return tasks
