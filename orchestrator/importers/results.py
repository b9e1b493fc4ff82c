"""Results produced elsewhere -> one headroom run (or one run per configuration).

**Identity.** A trial is a duplicate only when it is the same trial: the same ``id`` (Harbor's
trial uuid, Terminal-Bench's trial ``id``) as a trial already read, or, for a trial without an
id, the same trial name inside the same source (run or job). Names repeat across runs
(``task.1-of-5``), so a name never matches across sources. A duplicate is counted in the
summary against the file holding the first copy; it is never imported twice.

**Configurations.** Every source belongs to a group, the submission it is part of (see
:mod:`orchestrator.importers.discover`). A group is one configuration per agent (Terminal-Bench:
the run's ``agent_name``; Harbor: ``agent@model``, as a job can hold several): a leaderboard
submission of five runs is one configuration of five source runs, and sources of two submissions
are never one configuration unless the user asks (``--merge`` joins configurations naming the same
agent and recorded model; the same ``--label`` given twice joins any); every join asked for is
listed in the summary. A configuration whose sources record no model carries its submission's
folder name in its label: the agent's name alone cannot tell two apart.

**Nothing lost silently.** Every file read has a :class:`~orchestrator.importers.source.FileRecord`;
the summary lists each one that was skipped, with the reason, and counts every trial as
imported, duplicate of a file, or skipped. ``ImportPlan.partial`` is true when anything was
skipped for a reason other than an exact duplicate.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.engine import provenance as provenance_mod
from orchestrator.errors import UserError
from orchestrator.importers import discover as discover_mod
from orchestrator.importers import harbor_job, sigkill, tb_run
from orchestrator.importers.outcomes import HARBOR_EXCEPTIONS, TB_FAILURE_MODES, UNMAPPED_EXCEPTION
from orchestrator.importers.source import FileRecord, Source, SourceTrial
from orchestrator.spec.provenance import ImportedSource, ImportRecord
from orchestrator.stats import scoring_rules as rules_mod
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord

UNRECORDED_DIGEST = "unrecorded"


@dataclass(eq=False)  # compared by identity: two sources are never 'equal'
class Configuration:
    label: str
    group: Path
    group_name: str
    agent_key: str | None
    models: set[str | None] = field(default_factory=set)  # the models its sources name (None: not recorded)
    sources: list[Source] = field(default_factory=list)
    trials: list[SourceTrial] = field(default_factory=list)  # imported
    notes: list[str] = field(default_factory=list)


@dataclass
class ImportPlan:
    sources: list[Source]
    configurations: list[Configuration]
    stray: list[FileRecord] = field(default_factory=list)
    threshold: float = 1.0
    merges: list[dict[str, Any]] = field(default_factory=list)  # joins the user asked for (--merge, --label)

    @property
    def trials(self) -> list[SourceTrial]:
        return [t for c in self.configurations for t in c.trials]

    @property
    def labels(self) -> list[str]:
        return [c.label for c in self.configurations]

    def files(self) -> list[FileRecord]:
        return [f for s in self.sources for f in s.files] + self.stray

    @property
    def partial(self) -> bool:
        """Something was skipped for a reason other than an exact duplicate."""
        return any(f.error or f.skipped for f in self.files())

    def summary(self) -> dict[str, Any]:
        files = self.files()
        trials = self.trials
        source_config = {s.name: c.label for c in self.configurations for s in c.sources}
        skipped: list[dict[str, Any]] = [{"file": f.shown, "reason": f.error, "trials": None} for f in files if f.error]
        skipped += [{"file": f.shown, "reason": r, "trials": n} for f in files for r, n in f.skipped.items()]
        reasons: Counter[str] = Counter()
        for s in skipped:
            reasons[s["reason"]] += s["trials"] or 1
        owner = {f.shown: s.name for s in self.sources for f in s.files}
        grouped: dict[tuple[str, str], dict[str, Any]] = {}
        for f in files:
            for of, n in f.duplicates.items():
                g = grouped.setdefault(
                    (owner.get(f.shown, "?"), owner.get(of, "?")),
                    {
                        "source": owner.get(f.shown, "?"),
                        "duplicate_of_source": owner.get(of, "?"),
                        "files": 0,
                        "trials": 0,
                        "examples": [],
                    },
                )
                g["files"] += 1
                g["trials"] += n
                if len(g["examples"]) < 3:
                    g["examples"].append({"file": f.shown, "duplicate_of": of, "trials": n})
        dups = list(grouped.values())
        unmapped: Counter[str] = Counter(
            t.rule.removesuffix(" (unmapped)") for t in trials if t.rule.endswith("(unmapped)")
        )
        totals = {
            "sources": len(self.sources),
            "configurations": len(self.configurations),
            "files_read": len(files),
            "trials_read": sum(f.trials for f in files),
            "trials_imported": sum(f.imported for f in files),
            "trials_duplicate": sum(sum(f.duplicates.values()) for f in files),
            "trials_skipped": sum(sum(f.skipped.values()) for f in files),
            "files_skipped": sum(1 for f in files if f.error),
        }
        return {
            "labels": self.labels,
            "totals": totals,
            "partial": self.partial,
            "trials_imported": len(trials),
            "sources": [source_summary(s, source_config.get(s.name)) for s in self.sources],
            "configurations": [config_summary(c, self.threshold) for c in self.configurations],
            "merges": self.merges,
            "skipped": skipped,
            "skip_reasons": dict(reasons.most_common()),
            "duplicates": dups,
            "stray_files": [f.to_dict() for f in self.stray],
            "rules": dict(Counter(t.rule for t in trials).most_common()),
            "unmapped": dict(unmapped),
            "problems": [f"{s.name}: {p}" for s in self.sources for p in s.problems]
            + [f"{c.label}: {n}" for c in self.configurations for n in c.notes],
        }


def _check(reported: float | None, recomputed: float | None) -> bool | None:
    return None if reported is None or recomputed is None else abs(reported - recomputed) < 1e-9


def _tb_checks(src: Source) -> list[dict[str, Any]]:
    """Each number the run reports beside the same number recomputed from its trials by terminal-bench's rule."""
    main = [t for t in src.trials if not t.evidence.get("per_trial_copy")]
    if not main:
        return []
    resolved = np.array([t.source_resolved for t in main], float)
    acc = float(resolved.mean())
    nt, ct = rules_mod._task_counts(np.array([t.task_id for t in main], dtype=object), resolved)
    checks = []
    for where, rep in src.reported.items():
        checks.append(
            {
                "reported_as": f"accuracy ({where})",
                "reported": rep.get("score"),
                "recomputed": acc,
                "agrees": _check(rep.get("score"), acc),
            }
        )
        for k, v in sorted((rep.get("pass_at_k") or {}).items()):
            mine = rules_mod.tb_pass_at_k(nt, ct, k)
            checks.append(
                {"reported_as": f"pass@{k} ({where})", "reported": v, "recomputed": mine, "agrees": _check(v, mine)}
            )
    return checks


def _harbor_key(t: SourceTrial) -> str:
    info = t.evidence.get("agent_info") or {}
    model = (info.get("model_info") or {}).get("name") if isinstance(info.get("model_info"), dict) else None
    dataset = t.task_source or "adhoc"
    return f"{info.get('name')}__{model}__{dataset}" if model else f"{info.get('name')}__{dataset}"


def _harbor_checks(src: Source) -> list[dict[str, Any]]:
    checks = []
    for key, rep in src.reported.items():
        mine = [t for t in src.trials if _harbor_key(t) == key] or (src.trials if len(src.reported) == 1 else [])
        rewards = [t.evidence.get("rewards") for t in mine]
        several = any(isinstance(r, dict) and len(r) > 1 for r in rewards)
        values = np.array([t.reward or 0.0 for t in mine], float)
        mean = None if (several or not mine) else float(values.mean())
        checks.append(
            {
                "reported_as": f"mean reward ({key})",
                "reported": rep.get("score"),
                "recomputed": mean,
                "agrees": _check(rep.get("score"), mean),
            }
        )
        binary = mine and not several and all(v in (0.0, 1.0) for v in values)
        mine_pak = (
            rules_mod.harbor_pass_at_k(
                *rules_mod._task_counts(np.array([t.task_id for t in mine], dtype=object), values)
            )
            if binary
            else {}
        )
        for k, v in sorted((rep.get("pass_at_k") or {}).items()):
            checks.append(
                {
                    "reported_as": f"pass@{k} ({key})",
                    "reported": v,
                    "recomputed": mine_pak.get(k),
                    "agrees": _check(v, mine_pak.get(k)),
                }
            )
    return checks


def source_summary(src: Source, configuration: str | None) -> dict[str, Any]:
    """What was read from one source, and its own numbers beside the same numbers recomputed by its own rule."""
    checks = _harbor_checks(src) if src.harness == "harbor" else _tb_checks(src)
    rule = (
        "mean reward over the job's trials, a trial without a reward counting 0; Harbor's pass@k"
        if src.harness == "harbor"
        else "resolved trials / all trials of the run (is_resolved null counts as unresolved); terminal-bench's pass@k"
    )
    return {
        "name": src.name,
        "path": str(src.path),
        "format": src.format,
        "harness": src.harness,
        "harness_version": src.harness_version,
        "configuration": configuration,
        "files_read": len(src.files),
        "trials_read": sum(f.trials for f in src.files),
        "trials_imported": len(src.kept),
        "trials_duplicate": sum(sum(f.duplicates.values()) for f in src.files),
        "trials_skipped": sum(sum(f.skipped.values()) for f in src.files),
        "files_skipped": sum(1 for f in src.files if f.error),
        "files": [f.to_dict() for f in src.files],
        "details": src.details,
        "problems": src.problems,
        "source_rule": rule,
        "accuracy_checks": checks,
    }


def config_summary(c: Configuration, threshold: float) -> dict[str, Any]:
    outcomes = Counter(t.outcome for t in c.trials)
    n = len(c.trials)
    kinds = sorted({s.harness for s in c.sources})
    rule = rules_mod.default_rule(kinds)
    frame_like = _frame_of(c.trials, c.label)
    scored = (
        rules_mod.evaluate(frame_like, [rules_mod.HEADROOM_FAIL, rule], default=rule, threshold=threshold)
        if n
        else None
    )
    own = (scored or {}).get("configs", {}).get(c.label, {})
    return {
        "label": c.label,
        "group": c.group_name,
        "sources": [s.name for s in c.sources],
        "trials": n,
        "outcomes": dict(outcomes),
        "headline": (outcomes["passed"] / n) if n else None,
        "source_rule": rule,
        "source_rule_score": (own.get(rule) or {}).get("estimate"),
        "moves": (scored or {}).get("moves", {}).get(c.label, {}).get(rule, []),
        "notes": c.notes,
        # verdicts read from the source's traces, not recorded by it (importers/sigkill.py): reason -> trials
        "inferred": dict(
            Counter(t.evidence["inferred_verdict"]["reason"] for t in c.trials if t.evidence.get("inferred_verdict"))
        ),
    }


def _frame_of(trials: list[SourceTrial], label: str) -> Any:
    """The imported trials as the rules read them (the same columns the store's rule frame carries)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "config_label": [label] * len(trials),
            "task_id": [t.task_id for t in trials],
            "attempt": [0] * len(trials),
            "source_run": [t.evidence.get("source_run") for t in trials],
            "outcome": [t.outcome for t in trials],
            "reason": [t.reason for t in trials],
            "reward": [t.reward for t in trials],
            "source_kind": [t.evidence.get("source") for t in trials],
            "tb_resolved": [t.evidence.get("is_resolved") for t in trials],
            "tb_mode": [t.evidence.get("failure_mode") for t in trials],
            "h_exception": [(t.evidence.get("exception") or {}).get("type") for t in trials],
            "h_rewards": [t.evidence.get("rewards") for t in trials],
        }
    )


def read_sources(
    paths: list[Path], *, threshold: float, overrides: dict[str, tuple[str, str | None]]
) -> tuple[list[Source], list[FileRecord]]:
    """Every source under the paths (at any depth), read; plus the files that were none."""
    found = discover_mod.discover(paths)
    sources = []
    names: Counter[str] = Counter()
    for f in found.found:
        src = (
            harbor_job.read(f, threshold=threshold, overrides=overrides)
            if f.kind == discover_mod.HARBOR_JOB
            else tb_run.read(f, overrides=overrides)
        )
        names[src.name] += 1
        if names[src.name] > 1:  # the same relative name under two paths given
            src.name = f"{src.name} #{names[src.name]}"
        src.group = f.group
        src.group_name = (f.group or f.anchor).name
        src.details["within_submission"] = (
            f.anchor.relative_to(f.group).as_posix()
            if f.group and f.group != f.anchor and f.group in f.anchor.parents
            else f.anchor.name
        )
        for t in src.trials:
            t.evidence["source_run"] = src.name
        sources.append(src)
    siblings = Counter(f.group for f in found.found)
    for src, f in zip(sources, found.found):
        if f.group is not None and siblings[f.group] > 1:  # a run alone in its folder: the folder names it
            _renamed_run_is_a_submission(src, f)
    return sources, found.stray


def _renamed_run_is_a_submission(src: Source, f: discover_mod.Found) -> None:
    """A run directory not named after the run it holds was named by a person: a submission of its own.

    The harnesses name a run's directory after its id (Terminal-Bench's ``run_id``, Harbor's ``job_name``), and
    the runs of one leaderboard submission keep those names; a submitter who files one run as a whole submission
    renames it (``20250902_orchestrator_claude-4-sonnet`` holding run ``2025-09-01__11-19-06``). Beside sibling
    runs in one folder, such a run is kept apart rather than joined to them by layout.
    """
    if f.kind == discover_mod.TB_FILE or f.group is None or f.group == f.anchor:
        return
    recorded = src.details.get("run_id") if src.harness == "terminal-bench" else src.details.get("job_name")
    if isinstance(recorded, str) and recorded and recorded != f.anchor.name:
        src.group, src.group_name = f.anchor, f.anchor.name
        src.details["within_submission"] = f.anchor.name
        src.problems.append(
            f"its directory is not named after the run it holds ({recorded}): read as a submission of its own"
        )


def _dedupe(sources: list[Source]) -> None:
    seen_uid: dict[str, SourceTrial] = {}
    for src in sources:
        src.kept = []
        seen_name: dict[str, SourceTrial] = {}
        for t in src.trials:
            first = seen_uid.get(t.trial_uid) if t.trial_uid else seen_name.get(t.trial_name)
            if first is None and t.trial_uid and t.trial_name in seen_name and not seen_name[t.trial_name].trial_uid:
                first = seen_name[t.trial_name]  # one copy with an id, one without, in the same source
            if first is not None:
                assert t.record is not None
                t.record.duplicates[first.file] += 1
                continue
            if t.trial_uid:
                seen_uid[t.trial_uid] = t
            seen_name.setdefault(t.trial_name, t)
            assert t.record is not None
            t.record.imported += 1
            src.kept.append(t)


def _model(c: Configuration) -> str | None:
    """The one model its sources name; None when they name none, or several."""
    return next(iter(c.models)) if len(c.models) == 1 else None


def _base_label(c: Configuration) -> str:
    """``agent@model`` as the source names them (Harbor's key already is); no agent named: the submission's name."""
    if c.agent_key is None:
        return c.group_name
    if c.sources and c.sources[0].harness == "harbor":
        return c.agent_key
    return f"{c.agent_key}@{_model(c)}" if _model(c) else c.agent_key


def _default_label(c: Configuration) -> str:
    """The base label; a configuration whose sources record no model is told apart by its submission's name."""
    if c.agent_key is not None and len(c.models) > 1:
        named = ", ".join(sorted(str(m) for m in c.models if m)) + (" and none" if None in c.models else "")
        c.notes.append(f"its runs name several models ({named}): labelled by the submission's name")
        return c.group_name
    base = _base_label(c)
    if c.agent_key is not None and _model(c) is None:
        return f"{base} ({c.group_name})"
    return base


def _merge(into: Configuration, other: Configuration) -> None:
    into.sources += [s for s in other.sources if s not in into.sources]
    into.trials += other.trials
    into.models |= other.models
    into.notes += [n for n in other.notes if n not in into.notes]


def _merge_record(label: str, parts: list[Configuration], how: str) -> dict[str, Any]:
    return {
        "label": label,
        "how": how,
        "submissions": [p.group_name for p in parts],
        "sources": [s.name for p in parts for s in p.sources],
    }


def _merge_same_agent_and_model(ordered: list[Configuration]) -> tuple[list[Configuration], list[dict[str, Any]]]:
    """``--merge``: configurations naming the same agent and the same recorded model become one.

    A configuration whose sources record no model is never merged this way: nothing in the files says two
    such submissions ran the same thing (``--label`` joins them when the user knows they did).
    """
    keep: list[Configuration] = []
    first: dict[tuple[str, str], Configuration] = {}
    parts: dict[int, list[Configuration]] = {}
    for c in ordered:
        model = _model(c)
        if c.agent_key is None or model is None:
            keep.append(c)
            continue
        key = (c.agent_key, model)
        if key in first:
            parts.setdefault(id(first[key]), [first[key]]).append(c)
            _merge(first[key], c)
            continue
        first[key] = c
        keep.append(c)
    merges = []
    for c in keep:
        if id(c) in parts:
            c.label = _base_label(c)
            merges.append(_merge_record(c.label, parts[id(c)], "--merge (the same agent and model)"))
    return keep, merges


def plan(
    sources: list[Source],
    *,
    threshold: float,
    labels: list[str] | None = None,
    stray: list[FileRecord] | None = None,
    merge: bool = False,
) -> ImportPlan:
    """Sources -> configurations: one per submission and agent; two submissions are joined only on request.

    A submission is the group discovery gave each source (its folder). Within it there is one configuration per
    agent its sources name (Harbor: per agent and model, as a job can hold several). Sources of different
    submissions are joined only when the user asks: ``merge`` (the same agent and recorded model) or the same
    ``--label`` given twice; every such join is listed in ``ImportPlan.merges``, and the summary prints it.
    """
    _dedupe(sources)
    configs: dict[tuple[Path | None, str | None], Configuration] = {}
    for src in sources:
        for t in src.kept or src.trials[:1]:  # a source of duplicates only still belongs to a configuration
            key = (src.group, t.agent_key)
            c = configs.get(key)
            if c is None:
                c = configs[key] = Configuration("", src.group or src.path, src.group_name, t.agent_key)
            if src not in c.sources:
                c.sources.append(src)
            c.models.add(t.model)
        for t in src.kept:
            configs[(src.group, t.agent_key)].trials.append(t)
    ordered = [c for c in configs.values() if c.trials]
    for c in ordered:
        c.label = _default_label(c)
        if c.agent_key is not None and c.models == {None} and len(c.sources) > 1:
            # the one case layout decides alone: say so, and how to keep them apart
            c.notes.append(
                f"its {len(c.sources)} runs name agent {c.agent_key} and no model: read as one submission "
                f"({c.group_name}) as they sit in one folder under the names the harness gave them; give each "
                "run as a PATH of its own to import them as separate submissions"
            )
    merges: list[dict[str, Any]] = []
    if merge:
        ordered, merges = _merge_same_agent_and_model(ordered)
    taken = Counter(c.label for c in ordered)
    for c in ordered:
        if taken[c.label] > 1 and not c.label.endswith(f"({c.group_name})"):
            c.label = f"{c.label} ({c.group_name})"  # two submissions of one agent and model: each keeps its name
    seen: Counter[str] = Counter()
    for c in ordered:
        seen[c.label] += 1
        if seen[c.label] > 1:
            c.label = f"{c.label} #{seen[c.label]}"
    if labels:
        if len(labels) != len(ordered):
            raise UserError(
                f"--label given {len(labels)} times for {len(ordered)} configurations "
                f"({_few([c.label for c in ordered])}); give one per configuration, in this order",
                field="--label",
            )
        named: dict[str, list[Configuration]] = {}
        for c, lab in zip(ordered, labels):
            named.setdefault(lab, []).append(c)
        for lab, same in named.items():
            same[0].label = lab
            for c in same[1:]:  # the same label twice: the user joins these configurations on purpose
                _merge(same[0], c)
            if len(same) > 1:
                merges.append(_merge_record(lab, same, "--label given the same name"))
        ordered = [same[0] for same in named.values()]
    for c in ordered:
        for t in c.trials:
            t.label = c.label
    if not ordered:
        files = [f for s in sources for f in s.files] + (stray or [])
        why = next((f"{f.shown}: {f.error}" for f in files if f.error), None) or next(
            (f"{f.shown}: {next(iter(f.skipped))}" for f in files if f.skipped), None
        )
        raise UserError("no trials found to import" + (f" (e.g. {why})" if why else ""))
    return ImportPlan(sources, ordered, list(stray or []), threshold, merges)


def _few(names: list[str], k: int = 6) -> str:
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def records(
    p: ImportPlan, *, name: str, argv: list[str] | None = None
) -> tuple[RunRecord, list[TaskRecord], list[TrialRecord]]:
    source_order: dict[str | None, int] = {s.name: i for i, s in enumerate(p.sources)}
    groups: dict[tuple[str, str], list[SourceTrial]] = {}
    for t in p.trials:
        groups.setdefault((t.label, t.task_id), []).append(t)
    attempt: dict[int, int] = {}
    for ts in groups.values():
        ordered = sorted(
            ts, key=lambda t: (source_order.get(t.evidence.get("source_run"), 0), t.started_at or "", t.trial_name)
        )
        for i, t in enumerate(ordered):
            attempt[id(t)] = i
    digests: dict[str, set[str]] = {}
    task_sources: dict[str, set[str]] = {}
    for t in p.trials:
        digests.setdefault(t.task_id, set()).add(t.task_digest or UNRECORDED_DIGEST)
        if t.task_source:
            task_sources.setdefault(t.task_id, set()).add(t.task_source)
    tasks = []
    for task_id, ds in sorted(digests.items()):
        # Several digests for one task: its content changed between trials; none is recorded as the digest
        # (the sources' summaries warn of it), every one is kept.
        known = sorted(d for d in ds if d != UNRECORDED_DIGEST)
        origin = ", ".join(sorted(task_sources.get(task_id, ()))) or None
        spec = {
            "imported": True,
            "digests_seen": known,
            "provenance": {"source": origin, "transformation": "imported result"},
        }
        if len(known) > 1:
            spec["digest_conflict"] = True
        tasks.append(TaskRecord(task_id, known[0] if len(known) == 1 else UNRECORDED_DIGEST, task_id, spec))
    trials = []
    used: set[str] = set()
    for i, t in enumerate(p.trials):
        trial_id = t.trial_name if t.trial_name not in used else f"{t.trial_name}#{t.evidence.get('source_run')}"
        n = 2
        while trial_id in used:  # the same name in several runs: each stays its own trial
            trial_id = f"{t.trial_name}#{t.evidence.get('source_run')}#{n}"
            n += 1
        used.add(trial_id)
        trials.append(
            TrialRecord(
                trial_id=trial_id,
                task_id=t.task_id,
                config_label=t.label,
                request_multiplier=1.0,
                limit_multiplier=None,
                attempt=attempt[id(t)],
                seed=0,
                order=i,
                source_run=t.evidence.get("source_run"),
                executions=[
                    ExecutionRecord(
                        try_index=0,
                        status="finished",
                        final=True,
                        started_at=t.started_at,
                        finished_at=t.finished_at,
                        outcome=t.outcome,
                        reason=t.reason,
                        reward=t.reward,
                        enforcement=t.enforcement,
                        duration_s=t.duration_s,
                        tokens_in=t.tokens_in,
                        tokens_out=t.tokens_out,
                        cost_usd=t.cost_usd,
                        evidence={**t.evidence, "trial_name": t.trial_name},
                    )
                ],
            )
        )
    harnesses = sorted({f"{s.harness} {s.harness_version or '(version unrecorded)'}" for s in p.sources})
    enforcement = ", ".join(sorted({t.enforcement for t in p.trials if t.enforcement})) or "unrecorded"
    models = sorted({t.label.split("@", 1)[1] for t in p.trials if "@" in t.label})
    agents = sorted({t.label.split("@", 1)[0] for t in p.trials})
    kinds = list(dict.fromkeys(s.harness for s in p.sources if s.kept))
    spec = {
        "name": name,
        "kind": "import",
        "configurations": p.labels,
        "reward_threshold": p.threshold,
        "agent": {"kind": "imported", "names": agents},
        "model": {"name": ", ".join(models) or None},
        "attempts": max((a + 1 for a in attempt.values()), default=0),
        "sources": [{"name": s.name, "path": str(s.path), "format": s.format} for s in p.sources],
        "configuration_sources": {c.label: [s.name for s in c.sources] for c in p.configurations},
        "scoring": {"source_kinds": kinds, "default_rule": rules_mod.default_rule(kinds)},
    }
    prov = provenance_mod.collect(None, argv or sys.argv)  # no backend ran these trials
    prov.import_ = ImportRecord(
        imported_at=datetime.now(UTC).isoformat(timespec="seconds"),
        harnesses=harnesses,
        sources=[
            ImportedSource(
                name=s.name,
                path=str(s.path),
                format=s.format,
                harness=s.harness,
                harness_version=s.harness_version,
                files_sha256=s.files_sha256,
                digest=s.digest,
                details=s.details,
                reported=s.reported,
            )
            for s in p.sources
        ],
        mapping={
            "harbor_exceptions": {k: list(v) for k, v in HARBOR_EXCEPTIONS.items()},
            "terminal_bench_failure_modes": {k: list(v) for k, v in TB_FAILURE_MODES.items()},
            "unmapped_becomes": list(UNMAPPED_EXCEPTION),
            "harbor_inferred": {"suspected_oom": sigkill.RULE},
            "reward_threshold": p.threshold,
        },
        summary=_compact(p.summary()),
    )
    backend = "import:" + "+".join(sorted({s.harness for s in p.sources}))
    run = RunRecord(name=name, backend=backend, enforcement=enforcement, axis="labels", spec=spec, provenance=prov)
    return run, tasks, trials


def _compact(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as provenance keeps it: per-file details only for files not imported whole."""
    out = dict(summary)
    out["sources"] = [
        {**s, "files": [f for f in s["files"] if f["status"] not in ("imported", "metadata")]}
        for s in summary["sources"]
    ]
    return out
