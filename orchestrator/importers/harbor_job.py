"""Harbor job directories: the job's ``result.json`` (and ``config.json``, ``lock.json``) plus each trial's ``result.json``.

The harness version comes from ``lock.json`` (``harbor.version`` and ``harbor.git_commit_hash``)
when the job wrote one.

Per trial: ``verifier_result.rewards`` (the ``reward`` key, or the only key),
``exception_info.exception_type`` (mapped by :mod:`orchestrator.importers.outcomes`),
``agent_result`` tokens and ``cost_usd``, the phase timings (environment setup,
agent setup, agent execution, verifier), and the config overrides (``override_cpus``,
``override_memory_mb``, ``override_storage_mb``, ``override_gpus``, the CPU and memory
enforcement policies). Environment variable *values* are never read into the store,
only their names: Harbor redacts secrets only partly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator import safejson
from orchestrator.importers.outcomes import harbor_verdict
from orchestrator.importers.source import Source, SourceTrial, label_for, number, seconds_between
from orchestrator.redact import redact_text
from orchestrator.trial_outputs import usage_value

#: A Harbor result.json written by another harness: larger than an agent's self-report, still bounded.
IMPORT_MAX_BYTES = 64 * 1024 * 1024
PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")
OVERRIDES = ("type", "override_cpus", "override_memory_mb", "override_storage_mb", "override_gpus",
             "cpu_enforcement_policy", "memory_enforcement_policy")


def _peek(path: Path) -> dict[str, Any]:
    try:
        data = safejson.loads(path.read_bytes(), max_bytes=IMPORT_MAX_BYTES)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_job_dir(path: Path) -> bool:
    """A job's result.json (it has ``n_total_trials`` or ``stats``), or trial directories right below."""
    if (path / "result.json").is_file():
        job = _peek(path / "result.json")
        return "n_total_trials" in job or "stats" in job
    return path.is_dir() and any(
        "trial_name" in _peek(p / "result.json") for p in path.iterdir() if p.is_dir() and (p / "result.json").is_file())


def _reward(vr: Any) -> tuple[float | None, str | None]:
    rewards = (vr or {}).get("rewards") if isinstance(vr, dict) else None
    if not isinstance(rewards, dict) or not rewards:
        return None, None
    if "reward" in rewards:
        return number(rewards["reward"]), "reward"
    if len(rewards) == 1:
        key = next(iter(rewards))
        return number(rewards[key]), key
    return None, f"several reward keys ({', '.join(sorted(rewards))}) and none named 'reward'"


def _trial(src: Source, rel: str, data: dict[str, Any], threshold: float,
           overrides: dict[str, tuple[str, str | None]]) -> SourceTrial | None:
    name = data.get("trial_name") or Path(rel).parent.name
    task = data.get("task_name")
    if not isinstance(task, str) or not task:
        src.problems.append(f"{rel}: no task_name; trial skipped")
        return None
    cfg = data.get("config") if isinstance(data.get("config"), dict) else {}
    agent_cfg = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
    env_cfg = cfg.get("environment") if isinstance(cfg.get("environment"), dict) else {}
    info = data.get("agent_info") if isinstance(data.get("agent_info"), dict) else {}
    model_info = info.get("model_info") if isinstance(info.get("model_info"), dict) else {}
    model = agent_cfg.get("model_name") or model_info.get("name")
    label = label_for(agent_cfg.get("name") or info.get("name") or agent_cfg.get("import_path"), model)
    reward, reward_key = _reward(data.get("verifier_result"))
    exc = data.get("exception_info") if isinstance(data.get("exception_info"), dict) else None
    exc_type = exc.get("exception_type") if exc else None
    verdict = harbor_verdict(exc_type, reward, threshold, overrides)
    if reward is None and reward_key and reward_key.startswith("several"):
        verdict = type(verdict)("harness_error", "reward_malformed", f"rewards: {reward_key}")
    ar = data.get("agent_result") if isinstance(data.get("agent_result"), dict) else {}
    phases = {p: seconds_between((data.get(p) or {}).get("started_at"), (data.get(p) or {}).get("finished_at"))
              for p in PHASES if isinstance(data.get(p), dict)}
    env_policy = {k: env_cfg.get(k) for k in OVERRIDES if env_cfg.get(k) is not None}
    enforcement = "harbor/" + str(env_cfg.get("type") or "unknown")
    if env_cfg.get("memory_enforcement_policy") or env_cfg.get("cpu_enforcement_policy"):
        enforcement += (f" (cpu {env_cfg.get('cpu_enforcement_policy') or 'default'}, "
                        f"memory {env_cfg.get('memory_enforcement_policy') or 'default'})")
    evidence = {
        "source": "harbor", "file": rel, "trial_uid": data.get("id"), "agent_info": info,
        "rewards": (data.get("verifier_result") or {}).get("rewards"),
        "exception": None if not exc else {
            "type": exc_type, "message": redact_text(str(exc.get("exception_message") or ""))[:500],
            "occurred_at": exc.get("occurred_at")},
        "phases_s": phases, "config_overrides": env_policy,
        "agent_override_timeout_sec": agent_cfg.get("override_timeout_sec"),
        "timeout_multiplier": cfg.get("timeout_multiplier"),
        "env_names": sorted({*(env_cfg.get("env") or {}), *(agent_cfg.get("env") or {})}),
        "n_cache_tokens": number(ar.get("n_cache_tokens")),
        "rule": verdict.rule,
    }
    started, finished = data.get("started_at"), data.get("finished_at")
    return SourceTrial(
        trial_name=str(name), trial_uid=str(data["id"]) if data.get("id") else None, task_id=task, label=label,
        outcome=verdict.outcome, reason=verdict.reason, reward=reward, rule=verdict.rule,
        source_resolved=bool(reward is not None and reward >= threshold),
        started_at=started, finished_at=finished, duration_s=seconds_between(started, finished),
        tokens_in=usage_value("tokens_in", ar.get("n_input_tokens"))[0],
        tokens_out=usage_value("tokens_out", ar.get("n_output_tokens"))[0],
        cost_usd=usage_value("cost_usd", ar.get("cost_usd"))[0], task_digest=data.get("task_checksum"),
        task_source=data.get("source") if isinstance(data.get("source"), str) else None, enforcement=enforcement,
        evidence=evidence, file=rel,
    )


def read(path: Path, *, threshold: float, overrides: dict[str, tuple[str, str | None]]) -> Source:
    src = Source(path=path.resolve(), format="harbor-job", harness="harbor", harness_version=None)
    job = src.read_json("result.json") if (path / "result.json").is_file() else {}
    config = src.read_json("config.json") if (path / "config.json").is_file() else {}
    lock = src.read_json("lock.json") if (path / "lock.json").is_file() else {}
    harbor = lock.get("harbor") if isinstance(lock, dict) and isinstance(lock.get("harbor"), dict) else {}
    if harbor.get("version") or harbor.get("git_commit_hash"):  # the job lock names the Harbor that ran it
        src.harness_version = " @ ".join(str(v) for v in (harbor.get("version"), harbor.get("git_commit_hash")) if v)
    for holder in (job, config):
        for key in ("harbor_version", "version"):
            if isinstance(holder, dict) and isinstance(holder.get(key), str):
                src.harness_version = src.harness_version or holder[key]
    if not isinstance(job, dict):
        job = {}
    src.details = {"job_id": job.get("id"), "started_at": job.get("started_at"), "finished_at": job.get("finished_at"),
                   "n_total_trials": job.get("n_total_trials"), "job_name": (config or {}).get("job_name"),
                   "n_attempts": (config or {}).get("n_attempts")}
    evals = ((job.get("stats") or {}).get("evals") or {}) if isinstance(job.get("stats"), dict) else {}
    for key, ev in evals.items():
        metrics = ev.get("metrics") if isinstance(ev, dict) else None
        values = [number(v) for m in (metrics or []) if isinstance(m, dict) for v in m.values()]
        values = [v for v in values if v is not None]
        src.reported[key] = {"score": values[0] if values else None, "n_trials": ev.get("n_trials"),
                             "n_errors": ev.get("n_errors")}
    for trial_dir in sorted(p for p in path.iterdir() if p.is_dir()):
        if not (trial_dir / "result.json").is_file():
            continue
        rel = f"{trial_dir.name}/result.json"
        data = src.read_json(rel)
        if not isinstance(data, dict) or "trial_name" not in data and "task_name" not in data:
            src.problems.append(f"{rel}: not a Harbor trial result; skipped")
            continue
        trial = _trial(src, rel, data, threshold, overrides)
        if trial is not None:
            src.trials.append(trial)
    if job.get("n_total_trials") is not None and job["n_total_trials"] != len(src.trials):
        src.problems.append(f"the job lists {job['n_total_trials']} trials; {len(src.trials)} trial results were found")
    return src
