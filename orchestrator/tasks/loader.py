"""Load task directories into :class:`Task` objects, refusing bad ones with a precise error."""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path

from pydantic import ValidationError

from orchestrator.errors import SpecError
from orchestrator.spec.task import Task, TaskSpec
from orchestrator.spec.unknown import first_validation_error

REQUIRED_FILES = ("instruction.md", "tests/test.sh")
#: Fields a Harbor task may leave to Harbor's defaults; headroom wants them written (they are what a sweep scales).
HARBOR_DEFAULTED = ("environment", "environment.cpus", "environment.memory_mb", "verifier", "verifier.timeout_sec")
#: What a golden task (one with a ``[grader]``) needs: it may omit tests/ entirely.
GOLDEN_REQUIRED_FILES = ("instruction.md",)


def required_files(spec: TaskSpec, path: Path) -> tuple[str, ...]:
    """A golden task without a tests/ directory is graded by its grader alone; any other task needs tests/test.sh.

    A golden task *with* tests/ still needs its test.sh: a tests/ directory without one is a mistake, not a choice.
    """
    if spec.grader is not None and not (path / "tests").exists():
        return GOLDEN_REQUIRED_FILES
    return REQUIRED_FILES


def crlf_scripts(path: Path) -> list[str]:
    """The task's shell scripts (``*.sh``, or a ``#!`` first line) with Windows (CRLF) line endings.

    The shell reads the ``\r`` as part of each command (``#!/bin/bash\r`` is not found, ``cd dir\r``
    fails), so such a task would end every trial as a harness error: refused when it is loaded.
    """
    found = []
    for f in sorted(path.rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts or f.stat().st_size > 1 << 20:
            continue
        try:
            with f.open("rb") as fh:
                head = fh.read(2)
                if not (f.suffix == ".sh" or head == b"#!"):
                    continue
                if b"\r\n" in head + fh.read():
                    found.append(f.relative_to(path).as_posix())
        except OSError:
            continue  # unreadable files are reported by the checks that need them
    return found


def crlf_problem(path: Path) -> str | None:
    bad = crlf_scripts(path)
    if not bad:
        return None
    return (
        f"{', '.join(bad)} {'has' if len(bad) == 1 else 'have'} Windows (CRLF) line endings; the shell would fail "
        "on every trial: convert with `sed -i 's/\\r$//' FILE` (or dos2unix)"
    )


def digest_dir(path: Path) -> str:
    """sha256 over relative paths and contents, so any edit to a task changes its digest."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(os.fsencode(f.relative_to(path).as_posix()))  # a file name need not be UTF-8
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def load_task(path: Path) -> Task:
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError(
            "the task directory's name is not UTF-8 (it becomes the task id)",
            file=os.fsencode(path).decode("utf-8", "replace"),
        ) from None
    toml_path = path / "task.toml"
    if not toml_path.is_file():
        raise SpecError("task.toml not found", file=str(toml_path))
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"malformed TOML ({exc})", file=str(toml_path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read ({exc})", file=str(toml_path)) from None
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as exc:
        field, msg = first_validation_error(exc, TaskSpec)
        if field in HARBOR_DEFAULTED:
            msg += (
                " (Harbor would use its default here; headroom runs resources as written: "
                "`headroom tasks import` writes Harbor's defaults in)"
            )
        raise SpecError(msg, file=str(toml_path), field=field) from None
    for rel in required_files(spec, path):
        if not (path / rel).is_file():
            raise SpecError("required file is missing", file=str(path / rel))
    if (crlf := crlf_problem(path)) is not None:
        raise SpecError(crlf, file=str(path))
    try:
        instruction = (path / "instruction.md").read_text(encoding="utf-8")
        digest = digest_dir(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read the task ({exc})", file=str(path)) from None
    return Task(
        id=path.name,
        path=str(path.resolve()),
        spec=spec,
        instruction=instruction,
        digest=digest,
        has_tests=(path / "tests" / "test.sh").is_file(),
    )


def load_tasks(root: Path, select: list[str] | None = None) -> list[Task]:
    """Load every task under ``root`` (a directory of task directories, or one task).

    ``select`` holds task ids or shell-style patterns; unknown ids are an error,
    because a silently smaller task set changes the benchmark.
    """
    from fnmatch import fnmatch

    if not root.exists():
        raise SpecError("tasks directory does not exist", file=str(root))
    if not root.is_dir():
        raise SpecError("not a directory of tasks", file=str(root))
    if (root / "task.toml").is_file():
        candidates = [root]
    else:
        candidates = sorted(p for p in root.iterdir() if p.is_dir() and (p / "task.toml").exists())
        stray = sorted(
            p
            for p in root.iterdir()
            if p.is_dir() and not (p / "task.toml").exists() and not p.name.startswith((".", "_"))
        )
        if stray and not candidates:
            raise SpecError("no task.toml in any subdirectory", file=str(root))
    if not candidates:
        raise SpecError("no tasks found (expected <dir>/<task-id>/task.toml)", file=str(root))
    if select:
        chosen = [p for p in candidates if any(fnmatch(p.name, pat) for pat in select)]
        for pat in select:
            if not any(fnmatch(p.name, pat) for p in candidates):
                raise SpecError(f"no task matches {pat!r}", file=str(root), field="tasks")
        candidates = chosen
    return [load_task(p) for p in candidates]


def set_digest(tasks: list[Task]) -> str:
    """The content digest of a task set: its tasks' ids and digests, in id order."""
    h = hashlib.sha256()
    for t in sorted(tasks, key=lambda t: t.id):
        h.update(f"{t.id}\0{t.digest}\n".encode())
    return h.hexdigest()
