"""Run by the pinned Harbor's own interpreter (never imported by headroom): load a job folder as Harbor does.

    <harbor venv python> harbor_check.py JOB_DIR  ->  JSON on stdout; exit 1 with the first error on stderr

Every file is validated with Harbor's own models (JobConfig, JobResult, JobLock; per trial TrialConfig,
TrialResult, TrialLock), then read again through the viewer's JobScanner (what `harbor view` lists), and
the job's stats are recomputed by Harbor's JobStats from the trial results, to be compared with the
stats the exporter wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harbor.metrics.mean import Mean
from harbor.models.job.config import JobConfig
from harbor.models.job.lock import JobLock, TrialLock
from harbor.models.job.result import JobResult, JobStats
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult
from harbor.viewer.scanner import JobScanner
from harbor.viewer.server import create_app


def viewer(job_dir: Path, trial_names: list[str]) -> dict:
    """What `harbor view` serves for the folder: its own app, asked through its own API (no browser)."""
    from fastapi.testclient import TestClient

    client = TestClient(create_app(job_dir.parent))
    jobs = client.get("/api/jobs").json()
    job = client.get(f"/api/jobs/{job_dir.name}")
    tasks = client.get(f"/api/jobs/{job_dir.name}/tasks")
    assert job.status_code == 200 and tasks.status_code == 200, (job.text, tasks.text)
    verifier = {}
    for name in trial_names:
        trial = client.get(f"/api/jobs/{job_dir.name}/trials/{name}")
        assert trial.status_code == 200, (name, trial.text)
        verifier[name] = client.get(f"/api/jobs/{job_dir.name}/trials/{name}/verifier-output").json().get("stdout")
    return {
        "jobs": [j.get("name") for j in jobs.get("items", [])],
        "tasks": tasks.json().get("total"),
        "verifier_stdout": verifier,
    }


def main(job_dir: Path) -> dict:
    job_config = JobConfig.model_validate_json((job_dir / "config.json").read_text())
    job_result = JobResult.model_validate_json((job_dir / "result.json").read_text())
    job_lock = JobLock.model_validate_json((job_dir / "lock.json").read_text())
    scanner = JobScanner(job_dir.parent)
    listed = scanner.list_trials(job_dir.name)
    trials = {}
    results = []
    for name in listed:
        d = job_dir / name
        TrialConfig.model_validate_json((d / "config.json").read_text())
        result = TrialResult.model_validate_json((d / "result.json").read_text())
        TrialLock.model_validate_json((d / "lock.json").read_text())
        assert scanner.get_trial_result(job_dir.name, name) is not None, name
        assert scanner.get_trial_config(job_dir.name, name) is not None, name
        results.append(result)
        exc = result.exception_info
        trials[name] = {
            "task_name": result.task_name,
            "trial_name": result.trial_name,
            "agent": result.agent_info.name,
            "rewards": result.verifier_result.rewards if result.verifier_result else None,
            "exception_type": exc.exception_type if exc else None,
            "exception_message": exc.exception_message if exc else None,
            "failure_cause": str(result.failure_cause) if result.failure_cause else None,
            "reward_valid": result.reward_valid,
            "files": sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()),
        }
    assert scanner.get_job_result(job_dir.name) is not None
    assert scanner.get_job_config(job_dir.name) is not None
    recomputed = JobStats.from_trial_results(results)
    by_eval: dict[str, list] = {}
    for r in results:  # Harbor's own Mean metric over each agent's rewards (a trial without one counts 0)
        key = JobStats.format_agent_evals_key(r.agent_info.name, None, r.source or "adhoc")
        by_eval.setdefault(key, []).append(r.verifier_result.rewards if r.verifier_result else None)
    written = job_result.stats
    return {
        "viewer": viewer(job_dir, listed),
        "job_name": job_config.job_name,
        "agents": [a.name for a in job_config.agents],
        "n_total_trials": job_result.n_total_trials,
        "lock_trials": len(job_lock.trials),
        "trials": trials,
        "stats_written": {
            "n_completed_trials": written.n_completed_trials,
            "n_errored_trials": written.n_errored_trials,
            "n_retries": written.n_retries,
            "n_input_tokens": written.n_input_tokens,
            "n_output_tokens": written.n_output_tokens,
            "cost_usd": written.cost_usd,
            "evals": {k: [v.n_trials, v.n_errors, dict(v.exception_stats)] for k, v in written.evals.items()},
            "metrics": {k: v.metrics for k, v in written.evals.items()},
        },
        "stats_recomputed": {
            "n_completed_trials": recomputed.n_completed_trials,
            "n_errored_trials": recomputed.n_errored_trials,
            "n_input_tokens": recomputed.n_input_tokens,
            "n_output_tokens": recomputed.n_output_tokens,
            "cost_usd": recomputed.cost_usd,
            "evals": {k: [v.n_trials, v.n_errors, dict(v.exception_stats)] for k, v in recomputed.evals.items()},
            "metrics": {k: [Mean().compute(v)] for k, v in by_eval.items()},
        },
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), default=str))
