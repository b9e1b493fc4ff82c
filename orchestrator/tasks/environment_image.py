"""The name of the image a task's ``environment/Dockerfile`` builds to, shared by every container backend.

A Terminal-Bench 2 task that names no ``docker_image`` ships its environment as a Dockerfile.
The Docker backend builds it under this tag; the Pod backend, which cannot build, runs the
image under the same tag, so one ``docker build -t <tag> environment/`` (then a push or an
import into the nodes' runtime) serves both. The tag follows the content of ``environment/``:
a changed task gets a new tag, an unchanged one reuses its image.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from orchestrator.spec.names import dns_label


def environment_digest(env_dir: Path) -> str:
    """sha256 over the relative path, mode bit and bytes of every file of the build context."""
    h = hashlib.sha256()
    for p in sorted(env_dir.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(env_dir).as_posix().encode() + b"\0")
            h.update(b"x" if p.stat().st_mode & 0o111 else b"-")
            h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def built_image_ref(task_id: str, task_dir: str | Path) -> str | None:
    """``headroom.local/task-<id>:<digest12>`` for a task with ``environment/Dockerfile``, else None."""
    env_dir = Path(task_dir) / "environment"
    if not (env_dir / "Dockerfile").is_file():
        return None
    return f"headroom.local/task-{dns_label(task_id, 40)}:{environment_digest(env_dir)[:12]}"
