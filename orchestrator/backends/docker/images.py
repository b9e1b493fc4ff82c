"""The image a try runs in: the task's ``docker_image``, or one built from ``environment/Dockerfile``.

Built images are tagged by the content of the task's ``environment/`` folder
(``headroom.local/task-<id>:<digest12>``), so an unchanged task reuses its image
and a changed one gets a new tag. Each tag is built at most once per process
(concurrent tries of a task wait for the one build), and a failed build is
remembered, so a broken Dockerfile fails every try quickly instead of being
rebuilt for each. ``--build`` rebuilds once per process even when the tag exists
(the daemon's layer cache keeps that cheap) and is the only way a changed base
image reaches an unchanged task.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orchestrator.errors import ImageUnavailable
from orchestrator.spec.evidence import ContainerImage
from orchestrator.spec.launch import TaskSource
from orchestrator.tasks.environment_image import built_image_ref

from .labels import MANAGED

MAX_BUILD_LOG = 4000


@dataclass(frozen=True)
class ImageInfo:
    ref: str
    id: str = field(metadata={"doc": "sha256 of the image config: what ran, whatever the tag says"})
    repo_digests: tuple[str, ...] = ()
    built: bool = False
    workdir: str = ""
    #: the image's VOLUME folders (a fresh anonymous volume each, in every container of it)
    volumes: tuple[str, ...] = ()

    def provenance(self) -> ContainerImage:
        return ContainerImage(ref=self.ref, id=self.id, repo_digests=list(self.repo_digests), built_here=self.built)


def _info(image: Any, ref: str, built: bool) -> ImageInfo:
    attrs = image.attrs
    return ImageInfo(
        ref=ref,
        id=attrs["Id"],
        repo_digests=tuple(attrs.get("RepoDigests") or ()),
        built=built,
        workdir=(attrs.get("Config") or {}).get("WorkingDir") or "",
        volumes=tuple(sorted((attrs.get("Config") or {}).get("Volumes") or {})),
    )


class ImageResolver:
    def __init__(
        self,
        client: docker.DockerClient,
        *,
        build: bool,
        build_network: str | None,
        pull: bool,
        build_timeout_s: float,
        default_image: str | None = None,
    ) -> None:
        self.client = client
        self.default_image = default_image
        self.force_build = build
        self.build_network = build_network
        self.pull = pull
        self.build_timeout_s = build_timeout_s
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._done: dict[str, ImageInfo | ImageUnavailable] = {}

    def resolve(self, task: TaskSource) -> ImageInfo:
        env_dir = Path(task.path) / "environment"
        has_dockerfile = (env_dir / "Dockerfile").is_file()
        if task.docker_image is None and not has_dockerfile and self.default_image:
            return self._once(self.default_image, lambda: self._existing(self.default_image))
        if self.force_build or task.docker_image is None:
            if not has_dockerfile:
                if task.docker_image:
                    raise ImageUnavailable("--build was given and the task has no environment/Dockerfile")
                raise ImageUnavailable(
                    "the task names no docker_image, has no environment/Dockerfile, and docker.default_image is unset"
                )
            tag = built_image_ref(task.task_id, task.path)
            assert tag is not None  # has_dockerfile
            return self._once(tag, lambda: self._build(env_dir, tag, task.task_id))
        ref = task.docker_image
        return self._once(ref, lambda: self._existing(ref))

    def _once(self, key: str, make: Any) -> ImageInfo:
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            done = self._done.get(key)
            if done is None:
                try:
                    done = make()
                except ImageUnavailable as exc:
                    done = exc
                self._done[key] = done
        if isinstance(done, ImageUnavailable):
            raise done
        return done

    def _existing(self, ref: str) -> ImageInfo:
        try:
            return _info(self.client.images.get(ref), ref, built=False)
        except docker.errors.ImageNotFound:
            if not self.pull:
                raise ImageUnavailable(f"image {ref} is not on the daemon and pulling is off") from None
        except docker.errors.APIError as exc:
            raise ImageUnavailable(f"cannot inspect image {ref}: {exc.explanation or exc}") from None
        try:
            return _info(self.client.images.pull(ref), ref, built=False)
        except docker.errors.APIError as exc:
            raise ImageUnavailable(f"cannot pull {ref}: {exc.explanation or exc}") from None

    def _build(self, env_dir: Path, tag: str, task_id: str) -> ImageInfo:
        if not self.force_build:
            try:
                return _info(self.client.images.get(tag), tag, built=False)
            except docker.errors.ImageNotFound:
                pass
        log: list[str] = []
        try:
            # The low-level call: the high-level one raises with the log only at the end, and
            # rm/forcerm leave no intermediate container behind even when a step fails.
            for chunk in self.client.api.build(
                path=str(env_dir),
                tag=tag,
                rm=True,
                forcerm=True,
                decode=True,
                network_mode=self.build_network,
                labels={MANAGED: "true", "headroom.dev/task": task_id[:63]},
                timeout=self.build_timeout_s,
            ):
                if "stream" in chunk:
                    log.append(chunk["stream"])
                if "error" in chunk:
                    tail = "".join(log)[-MAX_BUILD_LOG:]
                    raise ImageUnavailable(
                        f"building {tag} from environment/Dockerfile failed: {chunk['error'].strip()}\n{tail}"
                    )
        except docker.errors.APIError as exc:
            raise ImageUnavailable(f"building {tag} failed: {exc.explanation or exc}") from None
        except docker.errors.DockerException as exc:
            raise ImageUnavailable(f"building {tag} failed: {exc}") from None
        try:
            return _info(self.client.images.get(tag), tag, built=True)
        except docker.errors.ImageNotFound:
            raise ImageUnavailable(f"the build of {tag} ended without an image") from None
