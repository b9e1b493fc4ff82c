"""Write a leaderboard-style set of legacy Terminal-Bench runs, in that harness's file shapes.

Each submission is a run directory with ``results.json`` and ``run_metadata.json``;
its ``accuracy`` is computed here the way terminal-bench computes it (resolved
trials / all trials, ``is_resolved`` null counting as unresolved), independently
of headroom's importer. Outcomes are drawn from a seeded generator with a
per-task difficulty, so submissions differ and trials cluster by task.
"""

from __future__ import annotations

import json
import random
from math import comb
from pathlib import Path
from typing import Any

FAILURES = [  # (is_resolved, failure_mode) for trials that do not pass
    (False, "none"),
    (False, "none"),
    (False, "agent_timeout"),
    (None, "test_timeout"),
    (None, "agent_installation_failed"),
    (False, "context_length_exceeded"),
    (None, "parse_error"),
]


def tb_pass_at_k(successes: dict[str, list[int]], k: int) -> float:
    """terminal-bench's unbiased pass@k, averaged over tasks with at least k attempts."""
    vals = []
    for s in successes.values():
        n, c = len(s), sum(s)
        if n < k:
            continue
        vals.append(1.0 if n - c < k else 1.0 - comb(n - c, k) / comb(n, k))
    return sum(vals) / len(vals)


def write_submission(
    root: Path, *, agent: str, model: str, skill: float, n_tasks: int, n_attempts: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    difficulty = [random.Random(1000 + t).random() for t in range(n_tasks)]  # shared by all submissions
    run_id = f"2026-09-{seed % 28 + 1:02d}__12-00-00"
    run_dir = root / f"{agent}-{model.replace('/', '-')}" / run_id
    run_dir.mkdir(parents=True)
    results = []
    successes: dict[str, list[int]] = {}
    for t in range(n_tasks):
        task = f"task-{t:03d}"
        for a in range(1, n_attempts + 1):
            ok = rng.random() < skill * (1.2 - difficulty[t])
            resolved, mode = (True, "none") if ok else rng.choice(FAILURES)
            name = f"{task}.{a}-of-{n_attempts}.{run_id}"
            results.append(
                {
                    "id": f"{seed:08d}-0000-4000-8000-{t * 100 + a:012d}",
                    "trial_name": name,
                    "task_id": task,
                    "instruction": f"Solve {task}.",
                    "is_resolved": resolved,
                    "failure_mode": mode,
                    "parser_results": None,
                    "recording_path": None,
                    "total_input_tokens": rng.randint(1000, 9000),
                    "total_output_tokens": rng.randint(100, 900),
                    "trial_started_at": f"2026-09-01T{t % 24:02d}:{a:02d}:00+00:00",
                    "trial_ended_at": f"2026-09-01T{t % 24:02d}:{a:02d}:30+00:00",
                }
            )
            successes.setdefault(task, []).append(1 if resolved else 0)
    accuracy = sum(1 for r in results if r["is_resolved"]) / len(results)
    (run_dir / "results.json").write_text(
        json.dumps(
            {
                "id": f"{seed:08d}-run",
                "results": results,
                "accuracy": accuracy,
                "n_resolved": sum(1 for r in results if r["is_resolved"]),
                "n_unresolved": sum(1 for r in results if not r["is_resolved"]),
                "pass_at_k": {str(k): tb_pass_at_k(successes, k) for k in (2, 4, 5) if k <= n_attempts},
            }
        )
    )
    (run_dir / "run_metadata.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "dataset_name": "terminal-bench-core",
                "dataset_version": "0.1.1",
                "agent_name": agent,
                "model_name": model,
                "n_attempts": n_attempts,
                "n_tasks": n_tasks,
                "accuracy": accuracy,
                "commit_hash": "feedface",
                "start_time": "2026-09-01T00:00:00+00:00",
            }
        )
    )
    return {
        "dir": run_dir.parent,
        "label": f"{agent}@{model}",
        "accuracy": accuracy,
        "pass_at_k": {k: tb_pass_at_k(successes, k) for k in (2, 5) if k <= n_attempts},
    }
