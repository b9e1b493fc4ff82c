"""Task files as one immutable ConfigMap per task content digest, shared by all its trials.

Read by the Pod backend, the controller and the task-set image (``tasks/image.py``), so it sits
with the tasks, below all three; it needs no Kubernetes client.

Why a ConfigMap: the files reach the pod without building or pushing an image and
without an init container that needs network access or a second image; one object
per task digest is created once and mounted by every trial, and ``immutable: true``
lets kubelets stop watching it. Each container mounts only its items: the task
container gets the instruction, ``task.toml`` and ``environment/`` (plus ``solution/``
for the oracle); only the warden container gets ``tests/``.

The limit is the API server's object size (about 1 MiB of data); a bigger task gets
a clear error naming its size.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import SpecError
from orchestrator.tasks import agent_view

#: What a ConfigMap may hold (etcd's request limit is 1.5 MiB; the API server caps ConfigMap data at 1 MiB).
MAX_CONFIGMAP_BYTES = 1024 * 1024
_KEY_BAD = re.compile(r"[^-._a-zA-Z0-9]+")
#: Not delivered: VCS and cache litter.
_SKIP_PARTS = {".git", "__pycache__", ".pytest_cache"}


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i << 24
        for _ in range(8):
            c = ((c << 1) ^ 0x04C11DB7) if c & 0x80000000 else (c << 1)
        table.append(c & 0xFFFFFFFF)
    return table


_TABLE = _crc_table()


def posix_cksum(data: bytes) -> int:
    """The CRC that POSIX ``cksum`` prints: what the in-pod runner can compute with nothing but POSIX tools."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[(crc >> 24) ^ b]
    n = len(data)
    while n:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[(crc >> 24) ^ (n & 0xFF)]
        n >>= 8
    return (~crc) & 0xFFFFFFFF


def configmap_data(files: Iterable[Any]) -> tuple[dict[str, str], dict[str, str]]:
    """A ConfigMap's ``data`` (UTF-8 files as text) and ``binaryData`` (the rest, base64) by file key."""
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    for f in files:
        try:
            data[f.key] = f.data.decode("utf-8")
        except UnicodeDecodeError:
            binary[f.key] = base64.b64encode(f.data).decode()
    return data, binary


@dataclass(frozen=True)
class TaskFile:
    path: str  # relative, '/'-separated
    key: str  # ConfigMap key
    data: bytes
    executable: bool


#: The ConfigMap key of the task.toml trial pods mount (tasks/agent_view.py): not a file of the task,
#: so a pushed set's index (which lists the files) never unpacks it.
AGENT_TOML_KEY = "headroom.agent-view.task.toml"


@dataclass
class TaskBundle:
    """A task's files, keyed for one ConfigMap, and the view of its ``task.toml`` a trial pod gets."""

    task_id: str
    digest: str
    files: list[TaskFile] = field(default_factory=list)
    # Every try's pod body needs these; a bundle is content-addressed (its files never change once
    # made), so each is computed once, not once per try (the CRCs cost more than the rest of the body).
    _memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        # "v2": bundles since task.toml is delivered as the agent's view; an older immutable bundle of the
        # same digest lacks that key, so it must not be taken for this one
        return f"headroom-task-v2-{self.digest[:37]}"

    def agent_toml(self) -> bytes | None:
        own = next((f for f in self.files if f.path == agent_view.TASK_TOML), None)
        return agent_view.delivered(own.path, own.data) if own is not None else None

    def items(self, prefix: str, strip: bool = False) -> list[dict[str, Any]]:
        """Volume items for the files under ``prefix`` (``""``: all but tests and solution)."""
        key = ("items", prefix, strip)
        if key not in self._memo:
            self._memo[key] = self._items(prefix, strip)
        return [dict(i) for i in self._memo[key]]

    def _items(self, prefix: str, strip: bool) -> list[dict[str, Any]]:
        out = []
        for f in self.files:
            top = f.path.split("/", 1)[0]
            if prefix:
                if top != prefix or "/" not in f.path:
                    continue
            elif top in ("tests", "solution"):
                continue
            path = f.path.split("/", 1)[1] if strip else f.path
            key = AGENT_TOML_KEY if f.path == agent_view.TASK_TOML else f.key
            out.append({"key": key, "path": path, "mode": 0o755 if f.executable else 0o644})
        return out

    def tests_manifest(self) -> str:
        """What the runner's ``manifest`` prints for the delivered tests: ``crc size ./path;`` sorted by path."""
        if "manifest" not in self._memo:
            self._memo["manifest"] = self._tests_manifest()
        return str(self._memo["manifest"])

    def _tests_manifest(self) -> str:
        tests = sorted((f.path.split("/", 1)[1], f.data) for f in self.files if f.path.startswith("tests/"))
        tests.sort(key=lambda t: ("./" + t[0]).encode())
        return "".join(f"{posix_cksum(d)} {len(d)} ./{p};" for p, d in tests)

    def configmap(self, labels: dict[str, str]) -> dict[str, Any]:
        data, binary = configmap_data(self.files)
        if (view := self.agent_toml()) is not None:
            data[AGENT_TOML_KEY] = view.decode("utf-8")
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "labels": {**labels, "headroom.dev/task-digest": self.digest[:63]},
                "annotations": {"headroom.dev/task": self.task_id},
            },
            "immutable": True,
            "data": data,
        }
        if binary:
            body["binaryData"] = binary
        return body


def read_files(task_dir: str | Path) -> list[TaskFile]:
    """Every file a task delivers (VCS and cache litter left out), keyed for a ConfigMap, sorted by path."""
    root = Path(task_dir)
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if _SKIP_PARTS & set(rel.parts):
            continue
        rel_s = rel.as_posix()
        key = f"{_KEY_BAD.sub('_', rel_s)[:200]}.{hashlib.sha256(rel_s.encode()).hexdigest()[:8]}"
        files.append(TaskFile(rel_s, key, path.read_bytes(), os.access(path, os.X_OK)))
    return files


def bundle(task_id: str, task_dir: str | Path, digest: str) -> TaskBundle:
    """Read a task directory into a bundle; refuse one too big for a ConfigMap."""
    b = TaskBundle(task_id=task_id, digest=digest, files=read_files(task_dir))
    total = sum(len(f.data) + len(f.key) for f in b.files)
    if total > MAX_CONFIGMAP_BYTES:
        raise SpecError(
            f"task {task_id} holds {total / 1024:.0f} KiB of files; the Kubernetes backend delivers task files as one "
            f"ConfigMap, which holds at most {MAX_CONFIGMAP_BYTES // 1024} KiB: ship the task set as an image "
            "(`headroom tasks image`) or the large inputs in the task's image",
            file=str(Path(task_dir)),
        )
    return b


@dataclass(frozen=True)
class ImageTaskFiles:
    """A task's files delivered by a task-set image (``headroom tasks image``): an init container
    copies ``/headroom-tasks/<task id>/`` into the pod's volumes, where a ConfigMap bundle would be mounted."""

    task_id: str
    image: str
    manifest: str  # the tests' manifest, recorded in the image's catalog when it was built

    def tests_manifest(self) -> str:
        return self.manifest


#: Where an installed agent's directory (``agent.path``) is mounted in the trial pod, read-only.
AGENT_DIR = "/agent"


@dataclass(frozen=True)
class AgentFiles:
    """An installed agent's host directory (``agent.path``), keyed for one immutable, content-addressed
    ConfigMap that the trial pod mounts read-only at :data:`AGENT_DIR`."""

    digest: str
    files: list[TaskFile] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"headroom-agent-{self.digest[:40]}"

    def items(self) -> list[dict[str, Any]]:
        return [{"key": f.key, "path": f.path, "mode": 0o755 if f.executable else 0o644} for f in self.files]

    def configmap(self, labels: dict[str, str]) -> dict[str, Any]:
        data, binary = configmap_data(self.files)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "labels": dict(labels)},
            "immutable": True,
            "data": data,
        }
        if binary:
            body["binaryData"] = binary
        return body


def agent_files(agent_dir: str | Path) -> AgentFiles:
    """Read an agent directory for a ConfigMap; refuse one too big for it, in one line."""
    files = read_files(agent_dir)
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.path}\0{int(f.executable)}\0{len(f.data)}\0".encode())
        h.update(f.data)
    total = sum(len(f.data) + len(f.key) for f in files)
    if total > MAX_CONFIGMAP_BYTES:
        raise SpecError(
            f"the agent directory holds {total / 1024:.0f} KiB of files; the Kubernetes backend delivers it as one "
            f"ConfigMap, which holds at most {MAX_CONFIGMAP_BYTES // 1024} KiB: build the agent into the task image, "
            "or fetch it in agent.install",
            file=str(Path(agent_dir)),
            field="agent.path",
        )
    return AgentFiles(h.hexdigest(), files)
