"""The controller image for the real-node tests: built from helm/Dockerfile, cached by its inputs.

Building it is the slowest step of the suite (a pip install of ~190 MB of wheels on 2 cores,
about 4 minutes), and its inputs rarely change. The image is saved (``docker save``) under
``${HEADROOM_CACHE_DIR:-~/.cache/headroom}/images/`` named by a digest of everything the
build reads: every file of the build context (path, mode, bytes), the Dockerfile, and the
base image's id. Same inputs, same image: a cache hit imports the saved archive into the
node's containerd and skips the build; any change to orchestrator/, tasks/, pyproject.toml,
the Dockerfile, the wheelhouse or the base image builds afresh. Only the newest archive is kept.
"""

from __future__ import annotations

import hashlib
import io
import os
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
    r = subprocess.run([str(REPO / "scripts" / "images" / "wheelhouse.sh"), "--path"], capture_output=True,
                       text=True, check=False)
    if r.returncode != 0:
        pytest.fail("the controller image's wheelhouse is missing: run scripts/images/wheelhouse.sh "
                    "(scripts/test.sh does)")
    return Path(r.stdout.strip())


def _context_files() -> list[tuple[str, Path]]:
    """(name in the context, file on disk) for what `docker build -f helm/Dockerfile .` sends."""
    out: list[tuple[str, Path]] = []
    roots = [(name, REPO / name) for name in CONTEXT] + [(".wheelhouse", wheelhouse())]
    for arc, root in roots:
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        out += [(arc if p == root else f"{arc}/{p.relative_to(root).as_posix()}", p)
                for p in paths if "__pycache__" not in p.parts]
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


def controller_image(docker_env: DockerEnv) -> ControllerImage:
    """The image's archive, from the cache when its inputs are unchanged, else built and saved."""
    t0 = time.monotonic()
    ref = f"{IMAGE_REPO}:{IMAGE_TAG}"
    cache = Path(os.environ.get("HEADROOM_CACHE_DIR") or Path.home() / ".cache" / "headroom") / "images"
    archive = cache / f"headroom-controller-{inputs_digest(docker_env.client.images.get(docker_env.base_image).id)}.tar"
    if archive.exists():
        return ControllerImage(ref, archive, False, time.monotonic() - t0)
    log: list[str] = []
    for chunk in docker_env.client.api.build(
            fileobj=_build_context(), custom_context=True, dockerfile="helm/Dockerfile", tag=ref, rm=True,
            forcerm=True, decode=True, buildargs={"BASE_IMAGE": docker_env.base_image}, network_mode="none"):
        log.append(chunk.get("stream", ""))
        assert "error" not in chunk, chunk["error"] + "".join(log)[-4000:]
    cache.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".partial")
    with partial.open("wb") as f:  # renamed only when complete: a crash never leaves a bad archive
        for chunk in docker_env.client.images.get(ref).save(named=ref):
            f.write(chunk)
    partial.rename(archive)
    for old in cache.glob("headroom-controller-*.tar"):
        if old != archive:
            old.unlink(missing_ok=True)
    return ControllerImage(ref, archive, True, time.monotonic() - t0)
