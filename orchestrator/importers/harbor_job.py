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

from typing import Any

from orchestrator.agentio.redact import redact_text
from orchestrator.contract.outputs import usage_value
from orchestrator.importers import sigkill
from orchestrator.importers.discover import Found
from orchestrator.importers.outcomes import Verdict, harbor_verdict
from orchestrator.importers.source import (
    FileRecord,
    Source,
    SourceTrial,
    label_for,
    number,
    seconds_between,
    time_or_none,
)
from orchestrator.spec.outcome import InfraReason

NO_TASK = "a trial result without task_name"
PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")
OVERRIDES = (
    "type",
    "override_cpus",
    "override_memory_mb",
    "override_storage_mb",
    "override_gpus",
    "cpu_enforcement_policy",
    "memory_enforcement_policy",
)


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


def _trial(
    rec: FileRecord,
    data: dict[str, Any],
    threshold: float,
    overrides: dict[str, tuple[str, str | None]],
    *,
    infer: bool = True,
) -> SourceTrial | None:
    rec.trials += 1
    name = data.get("trial_name") or rec.path.parent.name
    task = data.get("task_name")
    if not isinstance(task, str) or not task:
        rec.skipped[NO_TASK] += 1
        return None
    cfg = _object(data.get("config"))
    agent_cfg = _object(cfg.get("agent"))
    env_cfg = _object(cfg.get("environment"))
    info = _object(data.get("agent_info"))
    model_info = _object(info.get("model_info"))
    model = agent_cfg.get("model_name") or model_info.get("name")
    label = label_for(agent_cfg.get("name") or info.get("name") or agent_cfg.get("import_path"), model)
    reward, reward_key = _reward(data.get("verifier_result"))
    exc = _object(data.get("exception_info"))  # empty: no exception recorded
    exc_type = exc.get("exception_type") if exc else None
    verdict = harbor_verdict(exc_type, reward, threshold, overrides)
    if reward is None and reward_key and reward_key.startswith("several"):
        verdict = Verdict("harness_error", "reward_malformed", f"rewards: {reward_key}")
    inferred = None
    if infer and verdict.outcome == "failed" and reward is not None and exc_type in (None, "NonZeroAgentExitCodeError"):
        verdict, inferred = _suspected_oom(rec, verdict, exc_type, str(exc.get("exception_message") or ""))
    ar = _object(data.get("agent_result"))
    phases = {
        p: seconds_between((data.get(p) or {}).get("started_at"), (data.get(p) or {}).get("finished_at"))
        for p in PHASES
        if isinstance(data.get(p), dict)
    }
    env_policy = {k: env_cfg.get(k) for k in OVERRIDES if env_cfg.get(k) is not None}
    enforcement = "harbor/" + str(env_cfg.get("type") or "unknown")
    if env_cfg.get("memory_enforcement_policy") or env_cfg.get("cpu_enforcement_policy"):
        enforcement += (
            f" (cpu {env_cfg.get('cpu_enforcement_policy') or 'default'}, "
            f"memory {env_cfg.get('memory_enforcement_policy') or 'default'})"
        )
    evidence = {
        "source": "harbor",
        "file": rec.shown,
        "trial_uid": data.get("id"),
        "agent_info": info,
        "rewards": (data.get("verifier_result") or {}).get("rewards")
        if isinstance(data.get("verifier_result"), dict)
        else None,
        "exception": None
        if not exc
        else {
            "type": exc_type,
            "message": redact_text(str(exc.get("exception_message") or ""))[:500],
            "occurred_at": exc.get("occurred_at"),
        },
        "phases_s": phases,
        "config_overrides": env_policy,
        "agent_override_timeout_sec": agent_cfg.get("override_timeout_sec"),
        "timeout_multiplier": cfg.get("timeout_multiplier"),
        "env_names": sorted(str(k) for k in {*_keys(env_cfg.get("env")), *_keys(agent_cfg.get("env"))}),
        "n_cache_tokens": number(ar.get("n_cache_tokens")),
        "rule": verdict.rule,
    }
    if inferred is not None:
        evidence["inferred_verdict"] = inferred
    started, finished = time_or_none(data.get("started_at")), time_or_none(data.get("finished_at"))
    return SourceTrial(
        trial_name=str(name),
        trial_uid=str(data["id"]) if data.get("id") else None,
        task_id=task,
        label=label,
        outcome=verdict.outcome,
        reason=verdict.reason,
        reward=reward,
        rule=verdict.rule,
        source_resolved=bool(reward is not None and reward >= threshold),
        started_at=started,
        finished_at=finished,
        duration_s=seconds_between(started, finished),
        tokens_in=usage_value("tokens_in", ar.get("n_input_tokens"))[0],
        tokens_out=usage_value("tokens_out", ar.get("n_output_tokens"))[0],
        cost_usd=usage_value("cost_usd", ar.get("cost_usd"))[0],
        task_digest=data.get("task_checksum") if isinstance(data.get("task_checksum"), str) else None,
        task_source=data.get("source") if isinstance(data.get("source"), str) else None,
        enforcement=enforcement,
        evidence=evidence,
        file=rec.shown,
        record=rec,
        source_error=exc_type or "no exception",
        agent_key=label,
        model=str(model) if model else None,
    )


def _suspected_oom(rec: FileRecord, verdict: Verdict, exc_type: str | None, message: str) -> tuple[Verdict, Any]:
    """A failed trial whose agent step was SIGKILLed: ``infra_error(suspected_oom)``, inferred, with its evidence.

    Harbor scores an OOM-killed agent as a wrong answer (reward 0, no exception); the kill shows only in the
    trial's agent directory (:mod:`orchestrator.importers.sigkill`). SIGKILL does not prove the OOM killer, so
    the verdict is its own reason, marked inferred, and the report shows the score both ways.
    """
    trial_dir = rec.path.parent
    signs = sigkill.read_signs(trial_dir, rec.shown.rsplit("/", 1)[0] if "/" in rec.shown else trial_dir.name)
    code = sigkill.exception_exit_code(exc_type, message)
    if code is not None:
        signs.exit_codes.append({"file": f"{rec.shown} (exception_info)", "code": code})
    if not signs.sigkilled:
        return verdict, None
    reason = InfraReason.SUSPECTED_OOM.value
    why = "no exception" if exc_type is None else exc_type
    return Verdict(
        "infra_error", reason, f"{why}, reward below threshold, agent step SIGKILLed -> infra_error({reason}), inferred"
    ), {
        "outcome": "infra_error",
        "reason": reason,
        "inferred": True,
        "scored_by_source_as": "failed",
        "evidence": signs.evidence(),
        "exit_codes": signs.exit_codes,
        "why": "the agent step was killed by SIGKILL (exit 137 = 128 + 9, or the shell's 'Killed') and the trial "
        "then scored below the threshold: what an OOM kill leaves; SIGKILL alone does not prove the OOM killer",
    }


def _object(x: Any) -> dict[str, Any]:
    """A JSON object as read (anything else, or nothing: empty)."""
    return x if isinstance(x, dict) else {}


def _keys(x: Any) -> list[Any]:
    """The variable names of an env mapping as written (anything else has none)."""
    return list(x) if isinstance(x, dict) else []


def _meta(found: Found, name: str, src: Source) -> dict[str, Any]:
    if name not in found.metadata:
        return {}
    rec, data = found.metadata[name]
    src.files.append(rec)
    if not rec.error and not isinstance(data, dict):
        rec.error = f"{name} is not a JSON object"
    return data if isinstance(data, dict) and not rec.error else {}


def read(found: Found, *, threshold: float, overrides: dict[str, tuple[str, str | None]]) -> Source:
    src = Source(
        path=found.anchor.resolve(), format="harbor-job", harness="harbor", harness_version=None, name=found.name
    )
    job: dict[str, Any] = {}
    if found.main is not None:
        rec, data = found.main
        src.files.append(rec)
        rec.role = "job"
        job = data if isinstance(data, dict) else {}
    config = _meta(found, "config.json", src)
    lock = _meta(found, "lock.json", src)
    harbor = _object(lock.get("harbor"))
    # A job headroom exported carries headroom's observed verdicts: nothing is inferred from its agent logs, which
    # the agent wrote (an exit-code.txt saying 137 must not turn its failure into an infra error). A lock that
    # only claims this makes the import stricter, never kinder: failures stay failures.
    infer = _object(lock.get("exported_by")).get("tool") != "headroom"
    if harbor.get("version") or harbor.get("git_commit_hash"):  # the job lock names the Harbor that ran it
        src.harness_version = " @ ".join(str(v) for v in (harbor.get("version"), harbor.get("git_commit_hash")) if v)
    for holder in (job, config):
        for key in ("harbor_version", "version"):
            if isinstance(holder.get(key), str):
                src.harness_version = src.harness_version or holder[key]
    src.details = {
        "job_id": job.get("id"),
        "started_at": job.get("started_at"),
        "finished_at": job.get("finished_at"),
        "n_total_trials": job.get("n_total_trials"),
        "job_name": config.get("job_name"),
        "n_attempts": config.get("n_attempts"),
    }
    stats = _object(job.get("stats"))
    evals = _object(stats.get("evals"))
    for key, ev in evals.items():
        metrics = ev.get("metrics") if isinstance(ev, dict) else None
        values = [number(v) for m in (metrics or []) if isinstance(m, dict) for v in m.values()]
        values = [v for v in values if v is not None]
        pak = _object(ev.get("pass_at_k")) if isinstance(ev, dict) else {}
        src.reported[key] = {
            "score": values[0] if values else None,
            "n_trials": ev.get("n_trials"),
            "n_errors": ev.get("n_errors"),
            "file": found.main[0].shown if found.main else None,
            "pass_at_k": {int(k): float(v) for k, v in pak.items() if str(k).isdigit() and number(v) is not None}
            or None,
        }
    for rec, data in sorted(found.trial_files, key=lambda f: f[0].shown):
        src.files.append(rec)
        if rec.error:
            continue
        t = _trial(rec, data, threshold, overrides, infer=infer)
        if t is not None:
            src.trials.append(t)
    listed = job.get("n_total_trials")
    if (
        isinstance(listed, int)
        and not isinstance(listed, bool)
        and listed > len(found.trial_files)
        and found.main is not None
    ):
        # Trials the job ran but whose results are not on disk are lost from every score: counted as skipped on
        # the job's own file, so the import stops without --allow-partial, never a warning alone.
        missing = listed - len(found.trial_files)
        job_rec = found.main[0]
        job_rec.trials += missing
        job_rec.skipped[f"listed by the job ({listed} trials) but no trial result.json on disk"] += missing
    elif listed is not None and listed != len(found.trial_files):
        src.problems.append(f"the job lists {listed} trials; {len(found.trial_files)} trial results were found")
    checksums: dict[str, set[str]] = {}
    for t in src.trials:
        if t.task_digest:
            checksums.setdefault(t.task_id, set()).add(t.task_digest)
    for task, seen in sorted(checksums.items()):
        if len(seen) > 1:
            src.problems.append(
                f"task {task}: the job's trials disagree on the task checksum ({', '.join(sorted(seen))}); "
                "its digest is recorded as unrecorded, every checksum seen is kept in the task record"
            )
    return src
