"""``headroom tasks image DIR --tag REF``: a task set as a container image an Experiment can name."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from orchestrator.commands.console import err
from orchestrator.errors import UserError

DEFAULT_BASE = "headroom.local/debian-base"


@click.command("image")
@click.argument("tasks_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--tag", "-t", required=True, help="the image reference to build, e.g. registry/team/tasks:v1")
@click.option(
    "--base",
    default=None,
    help=f"base image with /bin/sh, cp and cat (default: the {DEFAULT_BASE} scripts/images/build.sh built last)",
)
@click.option(
    "--build-dir",
    "context_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="write the build context (Dockerfile + headroom-tasks/) here and do not build",
)
# --context was this option's name until it clashed with --context, the old name of --kube-context.
def image(tasks_dir: Path, tag: str, base: str | None, context_dir: Path | None) -> None:
    """Build TASKS_DIR into a task-set image (layout: /headroom-tasks/catalog.json + /headroom-tasks/<task>/).

    Name it in an Experiment as `task_source: {image: TAG}`; push or import it where the nodes pull from.
    Without --build-dir it builds with the Docker daemon at $DOCKER_HOST, without network (the base must be local).
    """
    from orchestrator.tasks.image import write_context

    if base is None:
        base = _local_base()
    if context_dir is not None:
        cat = write_context(tasks_dir, context_dir, base)
        err.print(
            f"{len(cat['tasks'])} task(s) from {tasks_dir} -> build context {context_dir} (FROM {base}); "
            f"build it with: docker build -t {tag} {context_dir}"
        )
        return
    with tempfile.TemporaryDirectory(prefix="headroom-task-image-") as tmp:
        cat = write_context(tasks_dir, Path(tmp) / "context", base)
        with err.status(f"building {tag} from {len(cat['tasks'])} task(s)"):
            _build(Path(tmp) / "context", tag)
    err.print(f"{len(cat['tasks'])} task(s) from {tasks_dir} -> image {tag} (set digest {cat['set_digest'][:12]})")
    click.echo(tag)


def _build(context: Path, tag: str) -> None:
    """``docker build`` through the Engine API ($DOCKER_HOST), with no network: the base must be local."""
    import docker
    import docker.errors

    try:
        api = docker.from_env().api
        for chunk in api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True, network_mode="none"):
            if "error" in chunk:
                raise UserError(f"docker build of {tag} failed: {chunk['error'].strip()}")
    except docker.errors.DockerException as exc:
        raise UserError(
            f"cannot build {tag} with the Docker daemon ({exc}); give --build-dir DIR and build the context elsewhere"
        ) from None


def _local_base() -> str:
    """The Debian base scripts/images/build.sh built last (its ``last.env``), which has sh, cp and cat."""
    cache = Path(os.environ.get("HEADROOM_CACHE_DIR") or Path.home() / ".cache" / "headroom")
    last = cache / "images" / "last.env"
    if last.is_file():
        for line in last.read_text().splitlines():
            if line.startswith("export HEADROOM_IMAGE_BASE="):
                return line.split("=", 1)[1].strip().strip("'\"")
    raise UserError(f"give --base IMAGE (no local {DEFAULT_BASE}: scripts/images/build.sh builds it)")
