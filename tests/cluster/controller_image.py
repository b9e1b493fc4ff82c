"""The controller image for the real-node tests: built from helm/Dockerfile, cached by its inputs.

Two archives are cached (``docker save``) under ``${HEADROOM_CACHE_DIR:-~/.cache/headroom}/images/``:

* the image itself, named by a digest of everything the build reads: every file of the build
  context (path, mode, bytes), the Dockerfile, and the base image's id. Same inputs, same image:
  a hit imports the archive into the node's containerd and builds nothing.
* the Dockerfile's ``deps`` stage (the dependencies installed from the wheelhouse: most of the
  build's time, ~4 minutes of pip on 2 cores), named by a digest of what that stage reads: the
  base image, the Dockerfile, pyproject.toml and the wheelhouse. A change to orchestrator/ or
  tasks/ alone loads it and builds with ``cache_from`` it, so only headroom itself is installed
  again. The test's dockerd is private to the session, so its own build cache never outlives it.

Only the newest archive of each kind is kept. One process builds at a time (a lock file beside the
archives): the engine worker's image test (tests/docker/test_controller_image.py, first in its group) builds
it at the suite's start, and the real node's chart test, last in the longest group, waits for it if it is
still being built and imports the archive, so the build is off the suite's critical path.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import re
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docker.fixtures import DockerEnv

from .plane import REPO

IMAGE_REPO = "headroom.local/headroom-controller"
IMAGE_TAG = "test"
CONTEXT = ("pyproject.toml", "README.md", "orchestrator", "tasks", "helm/Dockerfile")


@dataclass
class ControllerImage:
    ref: str
    archive: Path
    built: bool  # False: the cached archive of the same inputs was used
    seconds: float


def wheelhouse() -> Path:
    r = subprocess.run(
        [str(REPO / "scripts" / "images" / "wheelhouse.sh"), "--path"], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        pytest.fail(
            "the controller image's wheelhouse is missing: run scripts/images/wheelhouse.sh (scripts/test.sh does)"
        )
    return Path(r.stdout.strip())


def _context_files() -> list[tuple[str, Path]]:
    """(name in the context, file on disk) for what `docker build -f helm/Dockerfile .` sends."""
    out: list[tuple[str, Path]] = []
    roots = [(name, REPO / name) for name in CONTEXT] + [(".wheelhouse", wheelhouse())]
    for arc, root in roots:
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        out += [
            (arc if p == root else f"{arc}/{p.relative_to(root).as_posix()}", p)
            for p in paths
            if "__pycache__" not in p.parts
        ]
    return out


def inputs_digest(base_image_id: str) -> str:
    h = hashlib.sha256(base_image_id.encode())
    for arc, path in _context_files():
        h.update(f"\0{arc}\0{path.stat().st_mode & 0o777:o}\0".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def _build_context() -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for arc, path in _context_files():
            tar.add(path, arcname=arc, recursive=False)
    buf.seek(0)
    return buf


def deps_digest(base_image_id: str) -> str:
    """What the Dockerfile's ``deps`` stage reads: the base image, the Dockerfile, pyproject.toml, the wheelhouse."""
    h = hashlib.sha256(base_image_id.encode())
    for arc, path in _context_files():
        if arc in ("helm/Dockerfile", "pyproject.toml") or arc.startswith(".wheelhouse/"):
            h.update(f"\0{arc}\0".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def _build(docker_env: DockerEnv, tag: str, *, target: str | None = None, cache_from: list[str] | None = None) -> None:
    log: list[str] = []
    for chunk in docker_env.client.api.build(
        fileobj=_build_context(),
        custom_context=True,
        dockerfile="helm/Dockerfile",
        tag=tag,
        rm=True,
        forcerm=True,
        decode=True,
        buildargs={"BASE_IMAGE": docker_env.base_image},
        network_mode="none",
        target=target,
        cache_from=cache_from,
    ):
        log.append(chunk.get("stream", ""))
        assert "error" not in chunk, chunk["error"] + "".join(log)[-4000:]


def _save(docker_env: DockerEnv, ref: str, archive: Path, prefix: str) -> None:
    partial = archive.with_suffix(".partial")
    with partial.open("wb") as f:  # renamed only when complete: a crash never leaves a bad archive
        for chunk in docker_env.client.images.get(ref).save(named=ref):
            f.write(chunk)
    partial.rename(archive)
    for old in archive.parent.glob(f"{prefix}-*.tar"):
        if old != archive and re.fullmatch(rf"{re.escape(prefix)}-[0-9a-f]{{16}}\.tar", old.name):
            old.unlink(missing_ok=True)  # the image's archives and the deps stage's are pruned apart


def controller_image(docker_env: DockerEnv) -> ControllerImage:
    """The image's archive, from the cache when its inputs are unchanged, else built (on the cached deps stage) and saved."""
    t0 = time.monotonic()
    ref = f"{IMAGE_REPO}:{IMAGE_TAG}"
    cache = Path(os.environ.get("HEADROOM_CACHE_DIR") or Path.home() / ".cache" / "headroom") / "images"
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / "headroom-controller.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker building the same image: wait for its archive
        archive, built = _cached_or_built(docker_env, cache, ref)
    return ControllerImage(ref, archive, built, time.monotonic() - t0)


def _cached_or_built(docker_env: DockerEnv, cache: Path, ref: str) -> tuple[Path, bool]:
    """The archive of ``ref`` for these inputs, and whether it was built now."""
    base_id = docker_env.client.images.get(docker_env.base_image).id
    archive = cache / f"headroom-controller-{inputs_digest(base_id)}.tar"
    if archive.exists():
        return archive, False
    deps_key = deps_digest(base_id)
    deps_ref = f"{IMAGE_REPO}-deps:{deps_key}"
    deps_archive = cache / f"headroom-controller-deps-{deps_key}.tar"
    if deps_archive.exists():
        with deps_archive.open("rb") as f:
            for _ in docker_env.client.api.load_image(f):  # the load's progress: read to its end
                pass
    else:
        _build(docker_env, deps_ref, target="deps")
        _save(docker_env, deps_ref, deps_archive, "headroom-controller-deps")
    _build(docker_env, ref, cache_from=[deps_ref])
    _save(docker_env, ref, archive, "headroom-controller")
    return archive, True
