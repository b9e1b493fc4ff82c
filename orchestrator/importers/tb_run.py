"""Legacy Terminal-Bench runs: ``results.json`` (or ``<prefix>_results.json``), ``run_metadata.json``, per-trial copies.

``results.json`` holds every trial (``id``, ``trial_name``, ``task_id``, ``is_resolved``
true/false/null, ``failure_mode``, ``total_input_tokens`` / ``total_output_tokens``, trial/agent/test
timestamps) and the run's own ``accuracy`` (resolved trials / all trials) and ``pass_at_k``.
``run_metadata.json`` names the agent, model, ``n_attempts``, dataset and the harness commit, and
repeats ``accuracy`` and ``pass_at_k``. The harness also writes each trial to
``<task>/<trial>/results.json``: those copies are read too; one that repeats an entry of the
run-level file (same ``id``, else the same trial name) is counted as a duplicate of it, and one the
run-level file lacks (a run interrupted before it was rewritten) is imported.

What the harness does that the rules here follow (terminal_bench/harness/harness.py): after an
agent timeout the trial's ``failure_mode`` is ``agent_timeout`` and the tests still run, so
``is_resolved`` can be true; ``accuracy`` counts ``is_resolved`` true over all trials.
"""

from __future__ import annotations

from typing import Any, cast

from orchestrator.importers.discover import Found
from orchestrator.importers.outcomes import tb_verdict
from orchestrator.importers.source import (
    FileRecord,
    Source,
    SourceTrial,
    label_for,
    number,
    seconds_between,
    time_or_none,
)

NO_ID = "a result without task_id or trial_name"


def _trial(
    rec: FileRecord,
    r: Any,
    label: str | None,
    agent_key: str | None,
    model: str | None,
    overrides: dict[str, tuple[str, str | None]],
    dataset: str | None,
) -> SourceTrial | None:
    rec.trials += 1
    task = r.get("task_id") if isinstance(r, dict) else None
    name = r.get("trial_name") if isinstance(r, dict) else None
    if not isinstance(task, str) or not task or not isinstance(name, str) or not name:
        rec.skipped[NO_ID] += 1
        return None
    resolved = r.get("is_resolved")
    resolved = resolved if isinstance(resolved, bool) else None
    mode = r.get("failure_mode") if isinstance(r.get("failure_mode"), str) else None
    verdict = tb_verdict(resolved, mode, overrides)
    started, ended = time_or_none(r.get("trial_started_at")), time_or_none(r.get("trial_ended_at"))
    return SourceTrial(
        trial_name=name,
        trial_uid=str(r["id"]) if r.get("id") else None,
        task_id=task,
        label=label or "",
        outcome=verdict.outcome,
        reason=verdict.reason,
        reward=None if resolved is None else float(resolved),
        rule=verdict.rule,
        source_resolved=resolved is True,
        started_at=started,
        finished_at=ended,
        duration_s=seconds_between(started, ended),
        tokens_in=number(r.get("total_input_tokens")),
        tokens_out=number(r.get("total_output_tokens")),
        task_source=dataset,
        enforcement="terminal-bench/docker",
        evidence={
            "source": "terminal-bench",
            "file": rec.shown,
            "trial_uid": r.get("id"),
            "is_resolved": resolved,
            "failure_mode": mode,
            "parser_results": r.get("parser_results"),
            "phases_s": {
                "agent": seconds_between(r.get("agent_started_at"), r.get("agent_ended_at")),
                "tests": seconds_between(r.get("test_started_at"), r.get("test_ended_at")),
            },
            "rule": verdict.rule,
        },
        file=rec.shown,
        record=rec,
        source_error=(mode or "unset").lower(),
        agent_key=agent_key,
        model=model,
    )


def read(found: Found, *, overrides: dict[str, tuple[str, str | None]]) -> Source:
    src = Source(
        path=found.anchor.resolve(),
        format="terminal-bench-run",
        harness="terminal-bench",
        harness_version=None,
        name=found.name,
    )
    meta: dict[str, Any] = {}
    if "run_metadata.json" in found.metadata:
        rec, data = found.metadata["run_metadata.json"]
        src.files.append(rec)
        if not rec.error and not isinstance(data, dict):
            rec.error = "run_metadata.json is not a JSON object"
        meta = data if isinstance(data, dict) and not rec.error else {}
    commit = meta.get("commit_hash")
    src.harness_version = f"commit {commit}" if commit and commit != "unknown" else None
    agent = meta.get("agent_name") if isinstance(meta.get("agent_name"), str) else None
    model = meta.get("model_name") if isinstance(meta.get("model_name"), str) else None
    label = label_for(agent, model) if agent else None  # no agent named: the submission's name (results.plan)
    src.details = {
        k: meta.get(k)
        for k in (
            "run_id",
            "agent_name",
            "model_name",
            "n_attempts",
            "dataset_name",
            "dataset_version",
            "dataset_path",
            "start_time",
            "end_time",
            "n_tasks",
        )
    }
    dataset = "@".join(str(v) for v in (meta.get("dataset_name"), meta.get("dataset_version")) if v) or None
    if found.main is not None:
        rec, run = found.main
        src.files.append(rec)
        # discovery admits a Terminal-Bench main file only with a results list (is_tb_results)
        rows = cast("list[Any]", run.get("results") if isinstance(run, dict) else [])
        src.details["results_id"] = run.get("id")
        for r in rows:
            t = _trial(rec, r, label, agent, model, overrides, dataset)
            if t is not None:
                src.trials.append(t)
        if number(run.get("accuracy")) is not None:
            src.reported["results.json"] = {
                "score": number(run["accuracy"]),
                "n_trials": len(rows),
                "file": rec.shown,
                "pass_at_k": _pass_at_k(run.get("pass_at_k")),
            }
    if number(meta.get("accuracy")) is not None:
        src.reported["run_metadata.json"] = {
            "score": number(meta["accuracy"]),
            "file": found.metadata["run_metadata.json"][0].shown,
            "pass_at_k": _pass_at_k(meta.get("pass_at_k")),
        }
    for rec, data in sorted(found.trial_files, key=lambda f: f[0].shown):
        src.files.append(rec)
        if rec.error:
            continue
        t = _trial(rec, data, label, agent, model, overrides, dataset)
        if t is not None:
            t.evidence["per_trial_copy"] = True
            src.trials.append(t)
    if found.main is None and found.trial_files:
        src.problems.append(
            "no run-level results.json: the trials were read from the per-trial files, and the "
            "run's own accuracy is not recorded"
        )
    if found.main is None and not found.trial_files:
        src.problems.append("run_metadata.json without any results: no trials")
    return src


def _pass_at_k(value: Any) -> dict[int, float] | None:
    """``{"2": 0.48, ...}`` as written by terminal-bench (keys are JSON strings) -> {2: 0.48}."""
    if not isinstance(value, dict):
        return None
    out = {}
    for k, v in value.items():
        try:
            kk = int(k)
        except (TypeError, ValueError):
            continue
        if number(v) is not None:
            out[kk] = float(v)
    return out or None
