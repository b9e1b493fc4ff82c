"""Find every Harbor job and Terminal-Bench run under the paths given, at any depth.

What is recognised, by the files a directory holds (their content decides, not only their name):

* a **Harbor job**: ``result.json`` with ``n_total_trials`` or ``stats`` (plus ``config.json`` and
  ``lock.json`` beside it), and trial directories each holding a trial ``result.json``
  (``trial_name``, ``task_name``); trial directories without a job ``result.json`` above them
  make a job of their parent directory;
* a **Terminal-Bench run**: ``results.json`` holding a ``results`` list and/or
  ``run_metadata.json``, plus the per-trial copies ``<task>/<trial>/results.json``; per-trial
  files without a run-level file make a run of the directory two levels up;
* a **Terminal-Bench run file**: ``<prefix>_results.json`` (leaderboard submissions name their runs
  ``<timestamp>_results.json``) holding a ``results`` list, with ``<prefix>_run_metadata.json``
  when there is one.

A trial's own directory is not searched further (agent logs and artifacts are not results), and
neither are hidden directories. A candidate file that is none of these, or cannot be read or
parsed, is recorded as skipped with the reason: the import summary lists it.

Every source belongs to a **group**, the submission it is part of: the nearest directory above it
that is not itself a run or job (a leaderboard submission folder holding its runs), or the source
itself when it is the path given. Configurations are made per group (see ``results.plan``).

A directory that holds sources directly *and* folders holding sources is a **collection** (a folder of
submissions: one-run submissions beside submission folders): each source directly in it is a submission
of its own. Every source under it records that collection (``Found.collection``). Layout never joins two
submissions: ``results.plan`` does that only when the user asks (``--merge``, ``--label``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.importers.source import METADATA, FileRecord, read_json_file

HARBOR_JOB, TB_RUN, TB_FILE = "harbor-job", "terminal-bench-run", "terminal-bench-run-file"


@dataclass
class Found:
    """One source as found: where it is, its main file, its metadata files and its per-trial files."""

    kind: str  # HARBOR_JOB | TB_RUN | TB_FILE
    anchor: Path  # the job or run directory, or the run file
    given: Path  # the path the user gave that it was found under
    main: tuple[FileRecord, Any] | None = None  # the job's result.json / the run's results.json
    metadata: dict[str, tuple[FileRecord, Any]] = field(default_factory=dict)
    trial_files: list[tuple[FileRecord, Any]] = field(default_factory=list)
    group: Path | None = None
    base: Path | None = None  # the nearest directory above it that is not a source (see groups)
    collection: Path | None = None  # the nearest collection directory at or above its base, if any

    @property
    def name(self) -> str:
        return shown(self.anchor, self.given)


@dataclass
class Discovery:
    found: list[Found] = field(default_factory=list)
    stray: list[FileRecord] = field(default_factory=list)  # files read that are none of the known shapes


def shown(path: Path, given: Path) -> str:
    """A path as the summary shows it: relative to the directory the user gave (its name included)."""
    base = given if given.is_dir() else given.parent
    try:
        rel = path.relative_to(base.parent)
    except ValueError:
        return str(path)
    return rel.as_posix()


def is_harbor_job(d: Any) -> bool:
    return isinstance(d, dict) and ("n_total_trials" in d or "stats" in d) and "trial_name" not in d


def is_harbor_trial(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and "trial_name" in d
        and "results" not in d
        and ("task_name" in d or "verifier_result" in d or "agent_info" in d or "exception_info" in d)
    )


def is_tb_results(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("results"), list)


def is_tb_trial(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and "trial_name" in d
        and "task_id" in d
        and "results" not in d
        and ("is_resolved" in d or "failure_mode" in d)
    )


def _is_run_file(name: str) -> bool:
    return name.endswith("results.json") and name != "results.json" and not name.startswith(".")


class _Walker:
    def __init__(self, given: Path) -> None:
        self.given = given
        self.units: dict[Path, Found] = {}
        self.harbor_trials: dict[Path, list[tuple[FileRecord, Any]]] = {}
        self.tb_trials: dict[Path, list[tuple[FileRecord, Any]]] = {}
        self.stray: list[FileRecord] = []

    def read(self, path: Path) -> tuple[FileRecord, Any]:
        return read_json_file(path, shown(path, self.given))

    def stray_file(self, rec: FileRecord, why: str) -> None:
        rec.error = rec.error or why
        self.stray.append(rec)

    def walk(self) -> None:
        stack = [self.given]
        while stack:
            d = stack.pop()
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError as exc:
                rec = FileRecord(path=d, shown=shown(d, self.given), role="directory")
                self.stray_file(rec, f"cannot list the directory ({exc.strerror or exc})")
                continue
            names = {e.name: e for e in entries}
            if self.visit(d, names):
                continue  # a trial's own directory: not searched further
            subdirs = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
            stack.extend(reversed(subdirs))

    def visit(self, d: Path, names: dict[str, os.DirEntry[str]]) -> bool:
        """Classify a directory's result files; True when it is one trial's directory."""
        rj = self.read(d / "result.json") if "result.json" in names and names["result.json"].is_file() else None
        rsj = self.read(d / "results.json") if "results.json" in names and names["results.json"].is_file() else None
        if rj is not None and is_harbor_trial(rj[1]):
            self.harbor_trials.setdefault(d.parent, []).append(rj)
            if rsj is not None:
                self.stray_file(rsj[0], "a results.json inside a Harbor trial directory")
            return True
        if rsj is not None and is_tb_trial(rsj[1]):
            self.tb_trials.setdefault(d.parent.parent, []).append(rsj)
            if rj is not None:
                self.stray_file(rj[0], "a result.json inside a Terminal-Bench trial directory")
            return True
        if rj is not None:
            if is_harbor_job(rj[1]):
                unit = self.units.setdefault(d, Found(HARBOR_JOB, d, self.given))
                unit.main = rj
                for meta in ("config.json", "lock.json"):
                    if meta in names and names[meta].is_file():
                        rec, data = self.read(d / meta)
                        rec.role = METADATA
                        unit.metadata[meta] = (rec, data)
            else:
                self.stray_file(rj[0], rj[0].error or "a result.json that is neither a Harbor job's nor a trial's")
        has_meta = "run_metadata.json" in names and names["run_metadata.json"].is_file()
        if (rsj is not None and is_tb_results(rsj[1])) or has_meta:
            unit = self.units.setdefault(d, Found(TB_RUN, d, self.given))
            if rsj is not None and is_tb_results(rsj[1]):
                unit.main = rsj
            elif rsj is not None:
                self.stray_file(rsj[0], rsj[0].error or "a results.json without a 'results' list")
            if has_meta:
                rec, data = self.read(d / "run_metadata.json")
                rec.role = METADATA
                unit.metadata["run_metadata.json"] = (rec, data)
        elif rsj is not None:
            self.stray_file(
                rsj[0], rsj[0].error or "a results.json that is neither a Terminal-Bench run's nor a trial's"
            )
        for name in sorted(n for n in names if _is_run_file(n) and names[n].is_file()):
            rec, data = self.read(d / name)
            if not is_tb_results(data):
                self.stray_file(rec, rec.error or "not a Terminal-Bench results file (no 'results' list)")
                continue
            unit = Found(TB_FILE, d / name, self.given, main=(rec, data))
            meta_path = d / (name.removesuffix("results.json") + "run_metadata.json")
            if meta_path.is_file():
                mrec, mdata = self.read(meta_path)
                mrec.role = METADATA
                unit.metadata["run_metadata.json"] = (mrec, mdata)
            self.units[d / name] = unit
        return False

    def finish(self) -> list[Found]:
        for job_dir, files in self.harbor_trials.items():
            self.units.setdefault(job_dir, Found(HARBOR_JOB, job_dir, self.given)).trial_files.extend(files)
        for run_dir, files in self.tb_trials.items():
            unit = self.units.get(run_dir)
            if unit is None or unit.kind != TB_RUN:
                unit = self.units.setdefault(run_dir, Found(TB_RUN, run_dir, self.given))
            unit.trial_files.extend(files)
        for anchor, (g, base, coll) in placement(list(self.units), self.given).items():
            unit = self.units[anchor]
            unit.group, unit.base, unit.collection = g, base, coll
        return sorted(self.units.values(), key=lambda u: u.anchor.as_posix())


def _base(anchor: Path, given: Path, anchors: set[Path]) -> Path:
    """The nearest directory above a source that is not a source itself (nested copies climb through their run)."""
    if anchor == given:
        return anchor
    g = anchor.parent
    while g != given and g in anchors and g != g.parent:
        g = g.parent
    return g


def placement(anchors: list[Path], given: Path) -> dict[Path, tuple[Path, Path, Path | None]]:
    """Per source: (its submission by layout, its base directory, the collection it sits under or None).

    A directory holding sources and no folder of its own sources is one submission (a leaderboard
    entry's folder holding its runs, or its one run). A directory that also holds such folders is a
    collection: by layout, each source directly in it is a submission of its own, as is the path given
    when it is a source itself. Runs of one agent kept at two depths
    (``sub/run1``, ``sub/more/run2``) are two submissions by layout: ``--merge`` joins them on request.
    """
    aset = set(anchors)
    base = {a: _base(a, given, aset) for a in anchors}
    members: dict[Path, list[Path]] = {}
    for a, b in base.items():
        members.setdefault(b, []).append(a)
    bases = set(members)
    collection = {b for b in bases if any(o != b and b in o.parents for o in bases)}
    out = {}
    for a, b in base.items():
        # its own submission: the path given, or a source directly in a collection; a folder holding its sources
        # (one or several) and no folder of sources is the submission (its name tells the submission apart)
        own = b == a or b in collection
        # the nearest collection at or above the base (the deepest one: a base may sit under several)
        under = max((c for c in collection if c == b or c in b.parents), key=lambda c: len(c.parts), default=None)
        out[a] = (a if own else b, b, under)
    return out


def discover(paths: list[Path]) -> Discovery:
    out = Discovery()
    for given in paths:
        if not given.exists():
            raise UserError("no such file or directory", file=str(given))
        if given.is_file():
            w = _Walker(given)
            if not _is_run_file(given.name) and given.name != "results.json":
                raise UserError(
                    "expected a Harbor job or Terminal-Bench run directory, a directory of them, or a "
                    "Terminal-Bench results file",
                    file=str(given),
                )
            rec, data = w.read(given)
            if rec.error or not is_tb_results(data):
                raise UserError(rec.error or "not a Terminal-Bench results file (no 'results' list)", file=str(given))
            unit = Found(TB_FILE, given, given, main=(rec, data), group=given)
            meta = given.parent / (given.name.removesuffix("results.json") + "run_metadata.json")
            if meta.is_file():
                mrec, mdata = w.read(meta)
                mrec.role = METADATA
                unit.metadata["run_metadata.json"] = (mrec, mdata)
            out.found.append(unit)
            continue
        w = _Walker(given)
        w.walk()
        if any(rec.path.parent == given for rec, _ in w.harbor_trials.get(given.parent, [])):
            raise UserError("this is one trial's directory; give its Harbor job directory", file=str(given))
        if any(rec.path.parent == given for rec, _ in w.tb_trials.get(given.parent.parent, [])):
            raise UserError("this is one trial's directory; give its Terminal-Bench run directory", file=str(given))
        found = w.finish()
        if not found:
            why = (
                f"; {len(w.stray)} file(s) looked like results but were not: {w.stray[0].shown} ({w.stray[0].error})"
                if w.stray
                else ""
            )
            raise UserError(
                "neither a Harbor job (result.json + trial dirs) nor a Terminal-Bench run "
                "(results.json, run_metadata.json), nor a directory holding them at any depth" + why,
                file=str(given),
            )
        out.found.extend(found)
        out.stray.extend(w.stray)
    seen: set[Path] = set()
    unique = []
    for f in out.found:  # a path given twice (or inside another given path) is read once
        if f.anchor.resolve() not in seen:
            seen.add(f.anchor.resolve())
            unique.append(f)
    out.found = unique
    return out
