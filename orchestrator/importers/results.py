"""Results produced elsewhere -> one headroom run (or one run per source).

Each configuration of an imported run is a *label* (``agent@model``), not a
resource level: the run is stored with ``axis = "labels"`` and its labels in the
order they were met (the order of the paths given), so reports keep that order
and run no trend test or calibration.

A trial that appears twice (same trial name, or same trial id) is reported and
skipped: never counted twice. Trials of one (label, task) get attempt numbers in
the order they started. Provenance records every source path, the sha256 of
every file read, the harness and its version, and the mapping rules that fired.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator import provenance as provenance_mod
from orchestrator.errors import UserError
from orchestrator.importers import harbor_job, tb_run
from orchestrator.importers.outcomes import HARBOR_EXCEPTIONS, TB_FAILURE_MODES, UNMAPPED_EXCEPTION
from orchestrator.importers.source import Source, SourceTrial
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord

UNRECORDED_DIGEST = "unrecorded"


@dataclass
class Duplicate:
    trial_name: str
    trial_uid: str | None
    file: str
    first_file: str
    source: str


@dataclass
class ImportPlan:
    sources: list[Source]
    trials: list[SourceTrial]
    labels: list[str]
    duplicates: list[Duplicate] = field(default_factory=list)
    threshold: float = 1.0

    def summary(self) -> dict[str, Any]:
        by_label: dict[str, Counter[str]] = {lab: Counter() for lab in self.labels}
        for t in self.trials:
            by_label[t.label][t.outcome] += 1
        unmapped: Counter[str] = Counter()
        timeout_passed = 0
        for t in self.trials:
            if t.rule.endswith("(unmapped)"):
                unmapped[t.rule.removesuffix(" (unmapped)")] += 1
            if t.outcome == "timeout" and t.source_resolved:
                timeout_passed += 1
        return {
            "labels": self.labels,
            "trials_imported": len(self.trials),
            "duplicates_skipped": [d.__dict__ for d in self.duplicates],
            "outcomes_by_label": {lab: dict(c) for lab, c in by_label.items()},
            "headline_by_label": {lab: (c["passed"] / sum(c.values()) if sum(c.values()) else None)
                                  for lab, c in by_label.items()},
            "rules": dict(Counter(t.rule for t in self.trials).most_common()),
            "unmapped": dict(unmapped),
            "timeouts_the_verifier_passed": timeout_passed,
            "sources": [source_summary(s, s.kept) for s in self.sources],
        }


def source_summary(src: Source, kept: list[SourceTrial]) -> dict[str, Any]:
    """The source's own numbers beside the same numbers recomputed, by the source's rule, from the imported trials."""
    n = len(kept)
    if src.harness == "harbor":
        recomputed = sum(t.reward or 0.0 for t in kept) / n if n else None
        rule = "mean reward over trials (a trial without a reward counts 0)"
    else:
        recomputed = sum(t.source_resolved for t in kept) / n if n else None
        rule = "resolved trials / all trials (is_resolved null counts as unresolved)"
    checks = []
    for key, rep in src.reported.items():
        score = rep.get("score")
        checks.append({"reported_as": key, "reported": score, "recomputed": recomputed,
                       "agrees": None if score is None or recomputed is None else abs(score - recomputed) < 1e-9})
    return {"path": str(src.path), "format": src.format, "harness": src.harness, "harness_version": src.harness_version,
            "files_read": len(src.files), "trials_read": len(src.trials), "trials_imported": n,
            "details": src.details, "problems": src.problems, "source_rule": rule, "accuracy_checks": checks}


def detect(path: Path) -> list[Path]:
    """The source directories under PATH: PATH itself, or each of its subdirectories that is one."""
    if not path.is_dir():
        raise UserError("not a directory (expected a Harbor job or a Terminal-Bench run directory)", file=str(path))
    if tb_run.is_run_dir(path) or harbor_job.is_job_dir(path):
        return [path]
    found = [p for p in sorted(path.iterdir()) if p.is_dir() and (tb_run.is_run_dir(p) or harbor_job.is_job_dir(p))]
    if not found:
        raise UserError("neither a Harbor job (result.json + trial dirs) nor a Terminal-Bench run "
                        "(results.json, run_metadata.json), nor a directory of them", file=str(path))
    return found


def read_sources(paths: list[Path], *, threshold: float, overrides: dict[str, tuple[str, str | None]]) -> list[Source]:
    sources = []
    for given in paths:
        for p in detect(given):
            if tb_run.is_run_dir(p):
                sources.append(tb_run.read(p, overrides=overrides))
            else:
                sources.append(harbor_job.read(p, threshold=threshold, overrides=overrides))
    return sources


def plan(sources: list[Source], *, threshold: float, labels: list[str] | None = None) -> ImportPlan:
    if labels:
        if len(labels) != len(sources):
            raise UserError(f"--label given {len(labels)} times for {len(sources)} sources; give one per source",
                            field="--label")
        for src, lab in zip(sources, labels):
            found = {t.label for t in src.trials}
            if len(found) > 1:
                raise UserError(f"{src.path} holds several agents/models ({', '.join(sorted(found))}); "
                                "--label can only rename a source with one", field="--label")
            for t in src.trials:
                t.label = lab
    seen_names: dict[str, SourceTrial] = {}
    seen_uids: dict[str, SourceTrial] = {}
    kept: list[SourceTrial] = []
    dups: list[Duplicate] = []
    order: list[str] = []
    for src in sources:
        src.kept = []
        for t in src.trials:
            first = seen_names.get(t.trial_name) or (seen_uids.get(t.trial_uid) if t.trial_uid else None)
            if first is not None:
                dups.append(Duplicate(t.trial_name, t.trial_uid, t.file, first.file, str(src.path)))
                continue
            seen_names[t.trial_name] = t
            if t.trial_uid:
                seen_uids[t.trial_uid] = t
            kept.append(t)
            src.kept.append(t)
            if t.label not in order:
                order.append(t.label)
    if not kept:
        raise UserError("no trials found to import")
    return ImportPlan(sources, kept, order, dups, threshold)


def records(p: ImportPlan, *, name: str, argv: list[str] | None = None) -> tuple[RunRecord, list[TaskRecord], list[TrialRecord]]:
    groups: dict[tuple[str, str], list[SourceTrial]] = {}
    for t in p.trials:
        groups.setdefault((t.label, t.task_id), []).append(t)
    attempt: dict[int, int] = {}
    for ts in groups.values():
        for i, t in enumerate(sorted(ts, key=lambda t: (t.started_at or "", t.trial_name))):
            attempt[id(t)] = i
    digests: dict[str, set[str]] = {}
    task_sources: dict[str, set[str]] = {}
    for t in p.trials:
        digests.setdefault(t.task_id, set()).add(t.task_digest or UNRECORDED_DIGEST)
        if t.task_source:
            task_sources.setdefault(t.task_id, set()).add(t.task_source)
    tasks = []
    for task_id, ds in sorted(digests.items()):
        # Several digests for one task: its content changed between trials; none is recorded as the digest.
        known = sorted(d for d in ds if d != UNRECORDED_DIGEST)
        origin = ", ".join(sorted(task_sources.get(task_id, ()))) or None
        tasks.append(TaskRecord(task_id, known[0] if len(known) == 1 else UNRECORDED_DIGEST, task_id,
                                {"imported": True, "digests_seen": known,
                                 "provenance": {"source": origin, "transformation": "imported result"}}))
    trials = []
    for i, t in enumerate(p.trials):
        finished = t.finished_at or t.started_at or ""
        trials.append(TrialRecord(
            trial_id=t.trial_name, task_id=t.task_id, config_label=t.label, request_multiplier=1.0,
            limit_multiplier=None, attempt=attempt[id(t)], seed=0, order=i,
            executions=[ExecutionRecord(
                try_index=0, status="finished", final=True, started_at=t.started_at or finished, finished_at=finished,
                outcome=t.outcome, reason=t.reason, reward=t.reward, enforcement=t.enforcement,
                duration_s=t.duration_s, tokens_in=t.tokens_in, tokens_out=t.tokens_out, cost_usd=t.cost_usd,
                evidence=t.evidence)],
        ))
    harnesses = sorted({f"{s.harness} {s.harness_version or '(version unrecorded)'}" for s in p.sources})
    enforcement = ", ".join(sorted({t.enforcement for t in p.trials if t.enforcement})) or "unrecorded"
    models = sorted({t.label.split("@", 1)[1] for t in p.trials if "@" in t.label})
    agents = sorted({t.label.split("@", 1)[0] for t in p.trials})
    spec = {
        "name": name, "kind": "import", "configurations": p.labels, "reward_threshold": p.threshold,
        "agent": {"kind": "imported", "names": agents}, "model": {"name": ", ".join(models) or None},
        "attempts": max((a + 1 for a in attempt.values()), default=0),
        "sources": [{"path": str(s.path), "format": s.format} for s in p.sources],
    }
    base = provenance_mod.collect({}, argv or sys.argv)
    base.pop("backend", None)
    prov = {
        **base,
        "import": {
            "imported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "harnesses": harnesses,
            "sources": [{"path": str(s.path), "format": s.format, "harness": s.harness,
                         "harness_version": s.harness_version, "files_sha256": s.files, "details": s.details,
                         "reported": s.reported} for s in p.sources],
            "mapping": {"harbor_exceptions": {k: list(v) for k, v in HARBOR_EXCEPTIONS.items()},
                        "terminal_bench_failure_modes": {k: list(v) for k, v in TB_FAILURE_MODES.items()},
                        "unmapped_becomes": list(UNMAPPED_EXCEPTION), "reward_threshold": p.threshold},
            "summary": p.summary(),
        },
    }
    backend = "import:" + "+".join(sorted({s.harness for s in p.sources}))
    run = RunRecord(name=name, backend=backend, enforcement=enforcement, axis="labels", spec=spec, provenance=prov)
    return run, tasks, trials
