"""Legacy Terminal-Bench run directories: ``results.json`` and ``run_metadata.json``.

``results.json`` holds every trial (``is_resolved`` true/false/null, ``failure_mode``,
``total_input_tokens`` / ``total_output_tokens``, trial/agent/test timestamps) and the
run's own ``accuracy`` (resolved trials / all trials). ``run_metadata.json`` names the
agent, model, ``n_attempts``, dataset and the harness commit. When the run-level
``results.json`` is absent, the per-trial ``<task>/<trial>/results.json`` files are read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.importers.outcomes import tb_verdict
from orchestrator.importers.source import Source, SourceTrial, label_for, number, seconds_between


def is_run_dir(path: Path) -> bool:
    return (path / "run_metadata.json").is_file() or (
        (path / "results.json").is_file() and not (path / "result.json").is_file())


def _trial(src: Source, rel: str, r: dict[str, Any], label: str, overrides: dict[str, tuple[str, str | None]],
           dataset: str | None = None) -> SourceTrial | None:
    task = r.get("task_id")
    name = r.get("trial_name")
    if not isinstance(task, str) or not isinstance(name, str):
        src.problems.append(f"{rel}: a result without task_id or trial_name; skipped")
        return None
    resolved = r.get("is_resolved")
    resolved = resolved if isinstance(resolved, bool) else None
    verdict = tb_verdict(resolved, r.get("failure_mode"), overrides)
    started, ended = r.get("trial_started_at"), r.get("trial_ended_at")
    return SourceTrial(
        trial_name=name, trial_uid=str(r["id"]) if r.get("id") else None, task_id=task, label=label,
        outcome=verdict.outcome, reason=verdict.reason,
        reward=None if resolved is None else float(resolved), rule=verdict.rule, source_resolved=resolved is True,
        started_at=started, finished_at=ended, duration_s=seconds_between(started, ended),
        tokens_in=number(r.get("total_input_tokens")), tokens_out=number(r.get("total_output_tokens")),
        task_source=dataset, enforcement="terminal-bench/docker",
        evidence={"source": "terminal-bench", "file": rel, "trial_uid": r.get("id"), "is_resolved": resolved,
                  "failure_mode": r.get("failure_mode"), "parser_results": r.get("parser_results"),
                  "phases_s": {"agent": seconds_between(r.get("agent_started_at"), r.get("agent_ended_at")),
                               "tests": seconds_between(r.get("test_started_at"), r.get("test_ended_at"))},
                  "rule": verdict.rule},
        file=rel,
    )


def read(path: Path, *, overrides: dict[str, tuple[str, str | None]]) -> Source:
    src = Source(path=path.resolve(), format="terminal-bench-run", harness="terminal-bench", harness_version=None)
    meta = src.read_json("run_metadata.json") if (path / "run_metadata.json").is_file() else {}
    meta = meta if isinstance(meta, dict) else {}
    commit = meta.get("commit_hash")
    src.harness_version = f"commit {commit}" if commit and commit != "unknown" else None
    label = label_for(meta.get("agent_name"), meta.get("model_name"))
    src.details = {k: meta.get(k) for k in ("run_id", "agent_name", "model_name", "n_attempts", "dataset_name",
                                            "dataset_version", "dataset_path", "start_time", "end_time", "n_tasks")}
    results: list[tuple[str, dict[str, Any]]] = []
    if (path / "results.json").is_file():
        run = src.read_json("results.json")
        rows = run.get("results") if isinstance(run, dict) else None
        if not isinstance(rows, list):
            src.problems.append("results.json has no 'results' list")
            rows = []
        results = [("results.json", r) for r in rows if isinstance(r, dict)]
        if isinstance(run, dict) and number(run.get("accuracy")) is not None:
            src.reported[f"{label} (results.json)"] = {"score": number(run["accuracy"]), "n_trials": len(rows)}
    else:
        for f in sorted(path.glob("*/*/results.json")):
            rel = f.relative_to(path).as_posix()
            data = src.read_json(rel)
            if isinstance(data, dict):
                results.append((rel, data))
    if number(meta.get("accuracy")) is not None:
        src.reported[f"{label} (run_metadata.json)"] = {"score": number(meta["accuracy"])}
    dataset = "@".join(str(v) for v in (meta.get("dataset_name"), meta.get("dataset_version")) if v) or None
    for rel, r in results:
        trial = _trial(src, rel, r, label, overrides, dataset)
        if trial is not None:
            src.trials.append(trial)
    return src
