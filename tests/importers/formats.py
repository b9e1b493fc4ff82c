"""Write Terminal-Bench runs and Harbor jobs in those harnesses' file shapes, from trials the test spells out.

Written for these tests (no real data): the field names and layouts follow terminal-bench's
``results.json`` / ``run_metadata.json`` / ``<task>/<trial>/results.json`` and Harbor's job
``result.json`` / ``config.json`` / ``<trial>/result.json``. The numbers each run reports
(``accuracy``, ``pass_at_k``, Harbor's mean) are computed here with ``math.comb``, independently of
headroom, so a test can check that headroom reproduces them.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from typing import Any


@dataclass
class T:
    """One Terminal-Bench trial: task, whether the tests passed (None: no verdict), and the failure mode."""

    task: str
    resolved: bool | None
    mode: str = "unset"
    started: str | None = "2026-03-01T10:00:00+00:00"
    uid: str | None = None  # None: a fresh uuid


def pass_at_k(successes: dict[str, list[int]], k: int) -> float:
    """1 - C(n - c, k) / C(n, k), averaged over the tasks with at least k attempts (terminal-bench's definition)."""
    vals = [1.0 - comb(len(s) - sum(s), k) / comb(len(s), k) for s in successes.values() if len(s) >= k]
    return sum(vals) / len(vals)


def tb_results(
    trials: list[T], run_id: str, *, names_with_run: bool = True, n_attempts: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(results entries, the run-level numbers terminal-bench would write for them)."""
    per_task: dict[str, int] = {}
    for t in trials:
        per_task[t.task] = per_task.get(t.task, 0) + 1
    n_attempts = n_attempts or max(per_task.values())
    seen: dict[str, int] = {}
    rows, successes = [], {}
    for t in trials:
        seen[t.task] = seen.get(t.task, 0) + 1
        name = f"{t.task}.{seen[t.task]}-of-{n_attempts}" + (f".{run_id}" if names_with_run else "")
        rows.append(
            {
                "id": t.uid or str(uuid.uuid4()),
                "trial_name": name,
                "task_id": t.task,
                "instruction": f"Do {t.task}.",
                "is_resolved": t.resolved,
                "failure_mode": t.mode,
                "parser_results": None,
                "recording_path": None,
                "total_input_tokens": 1000,
                "total_output_tokens": 100,
                "trial_started_at": t.started,
                "trial_ended_at": t.started,
                "agent_started_at": t.started,
                "agent_ended_at": t.started,
                "test_started_at": t.started,
                "test_ended_at": t.started,
            }
        )
        successes.setdefault(t.task, []).append(1 if t.resolved else 0)
    accuracy = sum(1 for r in rows if r["is_resolved"]) / len(rows)
    min_n = min(len(s) for s in successes.values())
    ks = sorted({k for k in (2, 4, 8) if k <= min_n} | {k for k in (5, 10) if k <= min_n})
    return rows, {
        "accuracy": accuracy,
        "pass_at_k": {str(k): pass_at_k(successes, k) for k in ks},
        "n_resolved": sum(1 for r in rows if r["is_resolved"]),
        "n_unresolved": sum(1 for r in rows if not r["is_resolved"]),
    }


def write_tb_run(
    run_dir: Path,
    trials: list[T],
    *,
    agent: str | None = "terminus",
    model: str | None = "m/one",
    per_trial_copies: bool = True,
    names_with_run: bool = True,
    metadata: bool = True,
) -> dict[str, Any]:
    """A run directory as ``tb run`` leaves it; returns what the run reports (accuracy, pass_at_k, trial rows)."""
    run_id = run_dir.name
    rows, numbers = tb_results(trials, run_id, names_with_run=names_with_run)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(json.dumps({"id": str(uuid.uuid4()), "results": rows, **numbers}, indent=2))
    if metadata:
        (run_dir / "run_metadata.json").write_text(
            json.dumps(
                {
                    "run_id": run_id,
                    "uuid": str(uuid.uuid4()),
                    "dataset_name": "terminal-bench-core",
                    "dataset_version": "0.1.1",
                    "output_path": "runs",
                    "agent_name": agent,
                    "no_rebuild": False,
                    "cleanup": False,
                    "log_level": 20,
                    "n_attempts": max(1, max(sum(1 for t in trials if t.task == x.task) for x in trials)),
                    "model_name": model,
                    "accuracy": numbers["accuracy"],
                    "pass_at_k": numbers["pass_at_k"],
                    "commit_hash": "0123abcd",
                    "start_time": "2026-03-01T10:00:00+00:00",
                },
                indent=2,
            )
        )
    if per_trial_copies:
        for r in rows:
            d = run_dir / r["task_id"] / r["trial_name"]
            d.mkdir(parents=True, exist_ok=True)
            (d / "results.json").write_text(json.dumps(r, indent=2))
            (d / "panes").mkdir(exist_ok=True)
            (d / "panes" / "post-test.txt").write_text("==== short test summary info ====\n")
    return {"dir": run_dir, "rows": rows, **numbers}


def write_tb_file(path: Path, trials: list[T], *, run_id: str) -> dict[str, Any]:
    """A leaderboard submission's ``<timestamp>_results.json``: a run's results.json under its own name."""
    rows, numbers = tb_results(trials, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"id": str(uuid.uuid4()), "results": rows, **numbers}, indent=2))
    return {"file": path, "rows": rows, **numbers}


@dataclass
class H:
    """One Harbor trial: task, its reward (None: no verifier result), its exception type, its task checksum."""

    task: str
    reward: float | None
    exception: str | None = None
    checksum: str | None = None
    started: str | None = "2026-04-01T10:00:00.000000Z"
    #: files under the trial's ``agent/`` directory, as Harbor leaves them (``exit-code.txt``, ``oracle.txt``,
    #: ``command-0/return-code.txt``, ``command-0/stdout.txt``): relative path -> text
    agent_files: dict[str, str] = field(default_factory=dict)
    message: str = "boom"  # the exception's message, when there is an exception


def write_harbor_job(
    job_dir: Path,
    trials: list[H],
    *,
    agent: str = "terminus-2",
    model: str | None = "model-h",  # None: the job records no model (an agent that picks its own)
    dataset: str = "example-org/bench",
    version: str = "0.21.0",
) -> dict[str, Any]:
    """A Harbor job directory; returns Harbor's own mean (rewards, a missing one counting 0) and pass@k."""
    job_dir.mkdir(parents=True, exist_ok=True)
    job_id = str(uuid.uuid4())
    counts: dict[str, int] = {}
    names = []
    for t in trials:
        counts[t.task] = counts.get(t.task, 0) + 1
        name = f"{t.task}__{uuid.uuid4().hex[:7]}"
        names.append(name)
        d = job_dir / name
        d.mkdir()
        (d / "result.json").write_text(
            json.dumps(
                {
                    "id": str(uuid.uuid4()),
                    "task_name": t.task,
                    "trial_name": name,
                    "trial_uri": f"file:///jobs/{job_dir.name}/{name}",
                    "task_id": {"path": f"datasets/{t.task}"},
                    "source": dataset,
                    "task_checksum": t.checksum or f"sha256:{t.task.encode().hex():0<64}"[:71],
                    "config": {
                        "trial_name": name,
                        "timeout_multiplier": 1.0,
                        "agent": {
                            "name": agent,
                            "model_name": f"example/{model}" if model else None,
                            "env": {"EXAMPLE_KEY": "sk-a****z"},
                        },
                        "environment": {"type": "docker", "override_memory_mb": 4096, "env": {}},
                        "job_id": job_id,
                    },
                    "agent_info": {
                        "name": agent,
                        "version": "2.0",
                        "model_info": {"name": model, "provider": "example"} if model else None,
                    },
                    "agent_result": {
                        "n_input_tokens": 100,
                        "n_cache_tokens": 0,
                        "n_output_tokens": 10,
                        "cost_usd": 0.001,
                    },
                    "verifier_result": None if t.reward is None else {"rewards": {"reward": t.reward}},
                    "exception_info": None
                    if t.exception is None
                    else {
                        "exception_type": t.exception,
                        "exception_message": t.message,
                        "exception_traceback": "",
                        "occurred_at": "2026-04-01T10:01:00Z",
                    },
                    "started_at": t.started,
                    "finished_at": t.started,
                    "agent_execution": {"started_at": t.started, "finished_at": t.started},
                },
                indent=2,
            )
        )
        for rel, text in t.agent_files.items():
            (d / "agent" / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / "agent" / rel).write_text(text)
    rewards = [t.reward or 0.0 for t in trials]
    mean = sum(rewards) / len(rewards)
    successes: dict[str, list[int]] = {}
    for t in trials:
        successes.setdefault(t.task, []).append(int((t.reward or 0.0) == 1.0))
    min_n = min(len(s) for s in successes.values())
    ks = sorted({k for k in (2, 4, 8, 16) if k <= min_n} | set(range(5, min_n + 1, 5)))
    pak = {
        k: sum(1.0 - comb(len(s) - sum(s), k) / comb(len(s), k) for s in successes.values()) / len(successes)
        for k in ks
    }
    key = f"{agent}__{model}__{dataset}" if model else f"{agent}__{dataset}"
    exc: dict[str, list[str]] = {}
    for t, n in zip(trials, names):
        if t.exception:
            exc.setdefault(t.exception, []).append(n)
    (job_dir / "result.json").write_text(
        json.dumps(
            {
                "id": job_id,
                "started_at": "2026-04-01T10:00:00",
                "finished_at": "2026-04-01T11:00:00",
                "n_total_trials": len(trials),
                "stats": {
                    "n_trials": len(trials),
                    "n_errors": sum(1 for t in trials if t.exception),
                    "evals": {
                        key: {
                            "n_trials": len(trials),
                            "n_errors": sum(1 for t in trials if t.exception),
                            "metrics": [{"mean": mean}],
                            "pass_at_k": {str(k): v for k, v in pak.items()},
                            "exception_stats": exc,
                        }
                    },
                },
            },
            indent=2,
        )
    )
    (job_dir / "config.json").write_text(json.dumps({"job_name": job_dir.name, "n_attempts": min_n}, indent=2))
    (job_dir / "lock.json").write_text(json.dumps({"harbor": {"version": version, "git_commit_hash": "abc123"}}))
    label = f"{agent}@example/{model}" if model else agent
    return {"dir": job_dir, "mean": mean, "pass_at_k": pak, "label": label}
