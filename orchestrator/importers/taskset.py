"""Read a set of tasks made for Harbor or Terminal-Bench, and write it as headroom task directories.

``read_task_set(PATH)`` accepts:

* one task directory, or a directory of task directories, each a Harbor task
  (``task.toml``) or a legacy Terminal-Bench task (``task.yaml``), mixed freely;
* a Harbor dataset: a directory with ``dataset.toml`` whose ``[[tasks]]`` give
  ``name`` (``org/name``) and ``digest``; each task is looked up beside the
  manifest as ``<name>``, ``<short name>`` or ``tasks/<short name>``.

Every task is checked on its own: a bad one is listed with its reason and the
others go on. Nothing is written until ``write_task_set``.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import tomlkit
from pydantic import ValidationError

from orchestrator.errors import SpecError, UserError
from orchestrator.importers import harbor_task, tb_task
from orchestrator.importers.fields import FieldReport, summarize
from orchestrator.spec.task import Task, TaskSpec
from orchestrator.spec.unknown import first_validation_error
from orchestrator.tasks.loader import REQUIRED_FILES, crlf_problem, digest_dir, load_task

HARBOR, TERMINAL_BENCH = "harbor", "terminal-bench"


@dataclass
class TaskEntry:
    task_id: str
    source: Path
    source_format: str
    spec: dict[str, Any]
    instruction: str
    report: FieldReport
    files: dict[str, Path | str] = field(default_factory=dict)  # dest path -> source file or text
    verbatim: bool = True  # task.toml is headroom-loadable as written
    dataset_name: str | None = None
    dataset_digest: str | None = None

    @property
    def cpus(self) -> float:
        return float(self.spec["environment"]["cpus"])

    @property
    def memory_mb(self) -> int:
        return int(self.spec["environment"]["memory_mb"])


def as_task(entry: TaskEntry) -> Task:
    """An entry as the Task a sweep would load (its spec after the import's conversion; path: its source folder),
    for the checks that read the task's files (orchestrator/tasks/needs.py)."""
    return Task(
        id=entry.task_id,
        path=str(entry.source),
        spec=TaskSpec.model_validate(entry.spec),
        instruction=entry.instruction,
        digest="",
    )


@dataclass
class BadTask:
    path: str
    reason: str


@dataclass
class TaskSet:
    root: Path
    entries: list[TaskEntry] = field(default_factory=list)
    bad: list[BadTask] = field(default_factory=list)
    dataset: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        formats: dict[str, int] = {}
        for e in self.entries:
            formats[e.source_format] = formats.get(e.source_format, 0) + 1
        return {
            "root": str(self.root),
            "dataset": self.dataset,
            "tasks_ok": len(self.entries),
            "tasks_bad": len(self.bad),
            "formats": formats,
            "bad": [{"path": b.path, "reason": b.reason} for b in self.bad],
            # The manifest's digest of each task, as listed (also written into the task as metadata.dataset_digest).
            "dataset_digests": {e.task_id: e.dataset_digest for e in self.entries if e.dataset_digest},
            "fields": summarize([e.report for e in self.entries]),
            "resources": resource_distribution(self.entries),
        }


def _spec_error(spec: dict[str, Any]) -> str | None:
    try:
        TaskSpec.model_validate(spec)
    except ValidationError as exc:
        where, msg = first_validation_error(exc, TaskSpec)
        return f"{where}: {msg}"
    return None


def _read_harbor(path: Path, agent_timeout: float | None) -> TaskEntry | BadTask:
    toml_path = path / "task.toml"
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        return BadTask(str(toml_path), f"malformed TOML ({exc})")
    except (OSError, UnicodeDecodeError) as exc:
        return BadTask(str(toml_path), f"cannot read ({exc})")
    spec, rep, problems = harbor_task.normalize(raw, agent_timeout_default=agent_timeout)
    problems += [f"{rel} is missing" for rel in REQUIRED_FILES if not (path / rel).is_file()]
    if (crlf := crlf_problem(path)) is not None:
        problems.append(crlf)
    if not problems and (err := _spec_error(spec)):
        problems.append(err)
    if problems:
        return BadTask(str(path), "; ".join(problems))
    try:
        instruction = (path / "instruction.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return BadTask(str(path / "instruction.md"), f"cannot read ({exc})")
    files: dict[str, Path | str] = {
        f.relative_to(path).as_posix(): f
        for f in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    }
    verbatim = _spec_error(raw) is None
    if not verbatim:
        files.pop("task.toml")
    return TaskEntry(path.name, path, HARBOR, spec, instruction, rep, files, verbatim)


def _read_terminal_bench(path: Path) -> TaskEntry | BadTask:
    spec, instruction, files, rep, problems = tb_task.convert(path)
    if (crlf := crlf_problem(path)) is not None:
        problems.append(crlf)
    if not problems and (err := _spec_error(spec)):
        problems.append(err)
    if problems:
        return BadTask(str(path), "; ".join(problems))
    return TaskEntry(path.name, path, TERMINAL_BENCH, spec, instruction, rep, files, verbatim=False)


def read_task(path: Path, agent_timeout: float | None = None) -> TaskEntry | BadTask:
    if (path / "task.toml").is_file():
        return _read_harbor(path, agent_timeout)
    if (path / "task.yaml").is_file():
        return _read_terminal_bench(path)
    return BadTask(str(path), "neither task.toml (Harbor) nor task.yaml (legacy Terminal-Bench)")


def _manifest(root: Path, agent_timeout: float | None) -> TaskSet:
    manifest = root / "dataset.toml"
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read the dataset manifest ({exc})", file=str(manifest)) from None
    info = cast("dict[str, Any]", data.get("dataset") if isinstance(data.get("dataset"), dict) else {})
    refs = data.get("tasks")
    if not isinstance(refs, list) or not refs:
        raise SpecError("no [[tasks]] entries", file=str(manifest), field="tasks")
    ts = TaskSet(
        root,
        dataset={
            "name": info.get("name"),
            "version": info.get("version"),
            "manifest": str(manifest),
            "tasks_listed": len(refs),
        },
    )
    seen: set[str] = set()
    for i, ref in enumerate(refs):
        name = ref.get("name") if isinstance(ref, dict) else None
        digest = ref.get("digest") if isinstance(ref, dict) else None
        if not isinstance(name, str) or not name:
            ts.bad.append(BadTask(f"{manifest}: tasks[{i}]", "entry has no name"))
            continue
        if name in seen:
            ts.bad.append(BadTask(f"{manifest}: tasks[{i}]", f"{name} is listed twice"))
            continue
        seen.add(name)
        short = name.rsplit("/", 1)[-1]
        where = next((p for p in (root / name, root / short, root / "tasks" / short) if p.is_dir()), None)
        if where is None:
            ts.bad.append(
                BadTask(
                    name,
                    f"not found beside the manifest (looked for {name}, {short}, tasks/{short}); "
                    "registry downloads are not supported",
                )
            )
            continue
        entry = read_task(where, agent_timeout)
        if isinstance(entry, BadTask):
            ts.bad.append(entry)
            continue
        entry.dataset_name, entry.dataset_digest = info.get("name"), digest
        if not (isinstance(digest, str) and digest.startswith("sha256:")):
            entry.report.add("unmapped", "dataset.tasks.digest", "missing or not sha256:<hex>")
        ts.entries.append(entry)
    return ts


def read_task_set(root: Path, *, agent_timeout: float | None = None) -> TaskSet:
    if not root.exists():
        raise UserError("no such file or directory", file=str(root))
    if root.is_file() and root.name == "dataset.toml":
        root = root.parent
    if not root.is_dir():
        raise UserError("expected a task directory, a directory of tasks, or a dataset.toml", file=str(root))
    if (root / "dataset.toml").is_file():
        return _manifest(root, agent_timeout)
    ts = TaskSet(root)
    if (root / "task.toml").is_file() or (root / "task.yaml").is_file():
        candidates = [root]
    else:
        candidates = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    if not candidates:
        raise UserError("no task directories found", file=str(root))
    for path in candidates:
        entry = read_task(path, agent_timeout)
        (ts.bad if isinstance(entry, BadTask) else ts.entries).append(entry)  # type: ignore[arg-type]
    return ts


def resource_distribution(entries: list[TaskEntry]) -> dict[str, Any]:
    """cpus and memory (MiB) min / median / max over the tasks, with the task at each end."""
    import numpy as np  # here, not at the top: the `tasks` commands load with `headroom --help`

    out: dict[str, Any] = {"n_tasks": len(entries)}
    for key, get in (
        ("cpus", lambda e: e.cpus),
        ("memory_mb", lambda e: e.memory_mb),
        ("agent_timeout_sec", lambda e: float(e.spec["agent"]["timeout_sec"])),
    ):
        if not entries:
            out[key] = None
            continue
        values = np.array([get(e) for e in entries], dtype=float)
        out[key] = {
            "min": float(values.min()),
            "median": float(np.median(values)),
            "max": float(values.max()),
            "min_task": entries[int(values.argmin())].task_id,
            "max_task": entries[int(values.argmax())].task_id,
        }
    return out


def above(entries: list[TaskEntry], *, cpus: float | None, memory_mb: int | None) -> list[TaskEntry]:
    """Tasks asking for more than the given size (either dimension)."""
    return [
        e
        for e in entries
        if (cpus is not None and e.cpus > cpus) or (memory_mb is not None and e.memory_mb > memory_mb)
    ]


def _strip_none(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _strip_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [_strip_none(v) for v in x if v is not None]
    return x


def _add_dataset_digest(path: Path, digest: str) -> None:
    """Record the manifest's digest in a task.toml copied as written: only ``[metadata] dataset_digest`` is added
    (tomlkit keeps every other line, comment and spelling as the author wrote it)."""
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    meta = doc.get("metadata")
    if meta is None:
        meta = tomlkit.table()
        doc["metadata"] = meta
    meta["dataset_digest"] = digest
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")


def write_task_set(ts: TaskSet, out: Path, *, force: bool = False) -> list[Path]:
    """Write every good task as ``out/<task id>/``; each written task must then load with headroom's own loader."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    kept: list[TaskEntry] = []
    for e in ts.entries:
        dest = out / e.task_id
        if dest.exists():
            if not force:
                ts.bad.append(BadTask(str(dest), "already exists (use --force to replace)"))
                continue
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for rel, src in e.files.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(src, Path):
                shutil.copy2(src, target)
            else:
                target.write_text(src, encoding="utf-8")
                if rel.endswith(".sh"):
                    target.chmod(0o755)
        if not e.verbatim:
            spec = dict(e.spec)
            if e.dataset_digest:
                spec.setdefault("metadata", {})["dataset_digest"] = e.dataset_digest
            (dest / "task.toml").write_text(tomlkit.dumps(_strip_none(spec)), encoding="utf-8")
        elif e.dataset_digest:
            _add_dataset_digest(dest / "task.toml", e.dataset_digest)
        try:
            load_task(dest)
        except SpecError as exc:
            shutil.rmtree(dest)
            ts.bad.append(BadTask(str(e.source), f"written task does not load: {exc.one_line()}"))
            continue
        written.append(dest)
        kept.append(e)
    ts.entries = kept
    return written


__all__ = [
    "TaskSet",
    "TaskEntry",
    "BadTask",
    "read_task_set",
    "write_task_set",
    "resource_distribution",
    "above",
    "digest_dir",
]
