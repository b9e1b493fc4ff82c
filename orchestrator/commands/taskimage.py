"""``headroom tasks image DIR --tag REF``: a task set as a container image an Experiment can name."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import click

from orchestrator.commands.console import err
from orchestrator.errors import UserError

DEFAULT_BASE = "headroom.local/debian-base"


@click.command("image")
@click.argument("tasks_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--tag", "-t", required=True, help="the image reference to build, e.g. registry/team/tasks:v1")
@click.option("--base", default=None, help="base image with /bin/sh, cp and cat (default: the newest local "
                                           f"{DEFAULT_BASE} from scripts/images/build.sh)")
@click.option("--context", "context_dir", type=click.Path(path_type=Path, file_okay=False),
              help="write the build context (Dockerfile + headroom-tasks/) here and do not build")
def image(tasks_dir: Path, tag: str, base: str | None, context_dir: Path | None) -> None:
    """Build TASKS_DIR into a task-set image (layout: /headroom-tasks/catalog.json + /headroom-tasks/<task>/).

    Name it in an Experiment as `task_source: {image: TAG}`; push or import it where the nodes pull from.
    Without --context it runs `docker build` (the docker CLI and its DOCKER_HOST).
    """
    from orchestrator.tasks.image import write_context

    if base is None:
        base = _local_base()
    if context_dir is not None:
        cat = write_context(tasks_dir, context_dir, base)
        err.print(f"{len(cat['tasks'])} task(s) from {tasks_dir} -> build context {context_dir} (FROM {base}); "
                  f"build it with: docker build -t {tag} {context_dir}")
        return
    if shutil.which("docker") is None:
        raise UserError("no docker CLI on PATH: give --context DIR and build the context elsewhere")
    with tempfile.TemporaryDirectory(prefix="headroom-task-image-") as tmp:
        cat = write_context(tasks_dir, Path(tmp) / "context", base)
        r = subprocess.run(["docker", "build", "-t", tag, str(Path(tmp) / "context")], capture_output=True, text=True)
    if r.returncode != 0:
        raise UserError(f"docker build failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    err.print(f"{len(cat['tasks'])} task(s) from {tasks_dir} -> image {tag} (set digest {cat['set_digest'][:12]})")
    click.echo(tag)


def _local_base() -> str:
    repo = Path(__file__).resolve().parents[2]
    script = repo / "scripts" / "images" / "build.sh"
    if script.is_file():
        r = subprocess.run([str(script), "--exports"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.startswith("export HEADROOM_IMAGE_BASE="):
                return line.split("=", 1)[1].strip().strip("'\"")
    raise UserError(f"give --base IMAGE (no local {DEFAULT_BASE}: scripts/images/build.sh builds it)")
