"""``headroom runs export --format harbor``: a run as a Harbor job folder that Harbor's own tools read.

The folder (docs/import.md, "Export to Harbor"):

    DIR/config.json, DIR/result.json, DIR/lock.json       the job's config, result (with its stats) and lock
    DIR/<task>__<id>/config.json, result.json, lock.json  one folder per trial: its config, result and lock
    DIR/<task>__<id>/agent/ ...                            the agent's stdout/stderr and its logs dir
    DIR/<task>__<id>/verifier/test-stdout.txt ...          the verifier's output
    DIR/<task>__<id>/artifacts/headroom/files/ ...         everything else headroom kept (beside: evidence, manifest)

One trial folder per trial that has a final try (its result); earlier tries count as Harbor's
``n_retries``. Each configuration is one Harbor agent, named by its label. A verdict that is not
the reward's is an ``exception_info`` whose type says which (:func:`exception_type`): Harbor's own
type where one means the same (``AgentTimeoutError``, ``MemoryLimitExceededError``), else a
``Headroom...Error`` type that ``headroom results import`` maps back (orchestrator/importers/outcomes.py).
Every name an agent or a task author chose becomes a file name only through
:mod:`orchestrator.export.names`; every file is created new (``O_EXCL | O_NOFOLLOW``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.artifacts import names as artifact_names
from orchestrator.artifacts import reader
from orchestrator.export import harbor_models as hm
from orchestrator.export.names import component, inside, relative
from orchestrator.importers.outcomes import HARBOR_EXCEPTIONS, HEADROOM_EXCEPTIONS
from orchestrator.spec.outcome import HarnessReason, InfraReason, Outcome
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord
from orchestrator.store.sqlite import Store

#: Harbor's own exception types that mean exactly one of headroom's verdicts, preferred so Harbor's error
#: policy files them as it files its own (a memory kill as a sandbox failure, a timeout as the agent's budget).
NATIVE: dict[tuple[str, str | None], str] = {
    (Outcome.TIMEOUT.value, None): "AgentTimeoutError",
    (Outcome.INFRA_ERROR.value, InfraReason.OOM_KILLED.value): "MemoryLimitExceededError",
    (Outcome.INFRA_ERROR.value, InfraReason.SUSPECTED_OOM.value): "SandboxLikelyOutOfMemoryError",
    (Outcome.HARNESS_ERROR.value, HarnessReason.VERIFIER_TIMEOUT.value): "VerifierTimeoutError",
    (Outcome.HARNESS_ERROR.value, HarnessReason.REWARD_MISSING.value): "RewardFileNotFoundError",
}
_BY_VERDICT = {v: k for k, v in HEADROOM_EXCEPTIONS.items()}
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: Where headroom's conventional artifact names go in Harbor's trial layout (the rest under artifacts/headroom/).
PLACES = {
    artifact_names.AGENT_STDOUT: "agent/stdout.txt",
    artifact_names.AGENT_STDERR: "agent/stderr.txt",
    artifact_names.VERIFIER_STDOUT: "verifier/test-stdout.txt",
    artifact_names.VERIFIER_STDERR: "verifier/test-stderr.txt",
}
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def exception_type(outcome: str | None, reason: str | None, reward: float | None, threshold: float) -> str | None:
    """The Harbor exception type that carries a verdict, or None when the reward alone says it (passed, failed)."""
    if (
        outcome is None
        or outcome == Outcome.PASSED.value
        or (outcome == Outcome.FAILED.value and reward is not None and reward < threshold)
    ):
        return None
    if outcome == Outcome.FAILED.value:
        return _BY_VERDICT[(Outcome.FAILED.value, None)]
    if outcome in (Outcome.TIMEOUT.value, Outcome.ABSTAINED.value):
        reason = None
    elif outcome == Outcome.INFRA_ERROR.value and reason not in {r.value for r in InfraReason}:
        reason = InfraReason.OTHER.value
    elif outcome == Outcome.HARNESS_ERROR.value and reason not in {r.value for r in HarnessReason}:
        reason = HarnessReason.ORCHESTRATOR_ERROR.value
    native = NATIVE.get((outcome, reason))
    if native is not None:
        assert HARBOR_EXCEPTIONS[native] == (outcome, reason)  # the import table reads it back the same
        return native
    return _BY_VERDICT[(outcome, reason)]


@dataclass
class ExportSummary:
    path: Path
    run_id: str
    trials: int
    configurations: list[str]
    retries: int
    without_result: int  # trials with no final try (the run was stopped): not in the folder
    artifacts: int = 0
    artifacts_not_written: list[dict[str, str]] = field(default_factory=list)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, _CREATE, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _write_model(path: Path, model: BaseModel) -> None:
    _write(path, model.model_dump_json(indent=4, exclude_none=True).encode())


def _time(value: str | None) -> str | None:
    """A stored time as ISO 8601 with a zone (the store keeps UTC; Harbor parses either spelling)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()


def _digest(task: TaskRecord | None, task_id: str) -> str:
    raw = task.digest if task is not None else ""
    if _HEX64.fullmatch(raw or ""):
        return f"sha256:{raw}"
    # Harbor's lock wants sha256:<64 hex>: anything else (an imported source's checksum, none) is hashed into one.
    return "sha256:" + hashlib.sha256(f"{task_id}\0{raw}".encode("utf-8", "surrogatepass")).hexdigest()


def _uuid(*parts: str) -> str:
    """A stable UUID for a headroom id (Harbor's ids are UUIDs; an export of the same run gets the same ones)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "headroom:" + "\0".join(parts)))


def _int(v: float | None) -> int | None:
    return None if v is None else round(v)


def _message(e: ExecutionRecord) -> str:
    """headroom's own account of a verdict (its words and its measurements, nothing the agent wrote)."""
    text = f"headroom verdict: {e.outcome}" + (f"({e.reason})" if e.reason else "")
    if e.peak_memory_bytes is not None or e.limit_memory_bytes is not None:
        text += f"; peak memory {e.peak_memory_bytes} bytes of a {e.limit_memory_bytes}-byte limit"
    return text


def _environment(run: RunRecord, e: ExecutionRecord) -> hm.EnvironmentConfig:
    limited = e.limit_cpus is not None or e.limit_memory_bytes is not None
    return hm.EnvironmentConfig(
        import_path=f"headroom.backends.{component(run.backend or 'unknown')}",
        override_cpus=e.limit_cpus,
        override_memory_mb=None if e.limit_memory_bytes is None else e.limit_memory_bytes // (1024 * 1024),
        cpu_enforcement_policy="limit" if limited else "auto",
        memory_enforcement_policy="limit" if limited else "auto",
    )


class _Folder:
    """Trial folder names: ``<task>__<7 hex of the trial id>``, as Harbor names them, unique within the job."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def name(self, task_id: str, trial_id: str) -> str:
        stem = component(task_id)[:32].rstrip("_-~") or "task"
        digest = hashlib.sha256(trial_id.encode("utf-8", "surrogatepass")).hexdigest()
        for n in range(7, 65):
            candidate = f"{stem}__{digest[:n]}"
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate
        raise ValueError(f"two trials share the id {trial_id!r}")  # sha256 prefixes of 64 hex differ otherwise


def _artifacts(
    db: sqlite3.Connection, run_id: str, trial: TrialRecord, e: ExecutionRecord, trial_dir: Path, summary: ExportSummary
) -> None:
    manifest: list[dict[str, Any]] = []
    own = Path("artifacts", "headroom")
    for a in reader.list_artifacts(db, run_id, trial.trial_id, e.try_index):
        entry: dict[str, Any] = {"name": a.name, "status": a.status, "sha256": a.sha256, "detail": a.detail}
        if a.sha256 is None:
            manifest.append({**entry, "written_to": None})
            continue
        if a.name in PLACES:
            rel = Path(PLACES[a.name])
        elif a.name.startswith(artifact_names.LOGS_PREFIX + "/"):
            rel = Path("agent") / relative(a.name.removeprefix(artifact_names.LOGS_PREFIX + "/"))
        else:  # under files/: no artifact name can reach the manifest or evidence beside it
            rel = own / "files" / relative(a.name)
        try:
            target = inside(trial_dir, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, _CREATE, 0o644)
            with os.fdopen(fd, "wb") as f:
                for chunk in reader.stream(db, a.sha256):
                    f.write(chunk)
        except (OSError, ValueError) as exc:  # a name that is a file here and a folder there, say: listed, not lost
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            summary.artifacts_not_written.append({"trial": trial_dir.name, "name": a.name, "why": why})
            manifest.append({**entry, "written_to": None, "why": why})
            continue
        summary.artifacts += 1
        manifest.append({**entry, "written_to": rel.as_posix()})
    (trial_dir / own).mkdir(parents=True, exist_ok=True)
    _write(trial_dir / own / "manifest.json", json.dumps(manifest, indent=2).encode())
    if e.evidence is not None:
        _write(trial_dir / own / "evidence.json", json.dumps(e.evidence, indent=2, default=str).encode())


def export(store: Store, run_id: str, out: Path) -> ExportSummary:
    """Write run ``run_id`` of ``store`` as a Harbor job folder at ``out`` (a new or empty directory)."""
    run, tasks, trials = store.export_run(run_id)
    by_task = {t.task_id: t for t in tasks}
    threshold = float(run.spec.get("reward_threshold") or 1.0)  # what the run's verdicts were reached with
    out.mkdir(parents=True, exist_ok=True)
    job_id = _uuid(run_id)
    job_dir = out.resolve()
    labels = list(dict.fromkeys(t.config_label for t in trials))
    final = [(t, next((e for e in t.executions if e.final), None)) for t in trials]
    done = [(t, e) for t, e in final if e is not None]
    summary = ExportSummary(
        path=out,
        run_id=run_id,
        trials=len(done),
        configurations=labels,
        retries=sum(len(t.executions) - 1 for t, _ in done),
        without_result=len(final) - len(done),
    )
    agents = {label: hm.AgentConfig(name=label) for label in labels}
    folders = _Folder()
    stats = hm.JobStats(n_retries=summary.retries)
    rewards: dict[str, list[float]] = {}
    locks: list[hm.TrialLock] = []
    starts, ends = [], []
    for trial, e in done:
        task = by_task.get(trial.task_id)
        name = folders.name(trial.task_id, trial.trial_id)
        trial_dir = inside(job_dir, Path(name))
        trial_dir.mkdir()
        env = _environment(run, e)
        task_cfg = hm.TaskConfig(path=trial.task_id)
        cfg = hm.TrialConfig(
            task=task_cfg, trial_name=name, trials_dir=str(job_dir), agent=agents[trial.config_label], environment=env
        )
        exc_type = exception_type(e.outcome, e.reason, e.reward, threshold)
        when = _time(e.finished_at) or _time(e.started_at) or _time(run.finished_at) or datetime.now(UTC).isoformat()
        usage = (e.tokens_in, e.tokens_out, e.cost_usd)
        result = hm.TrialResult(
            id=_uuid(run_id, trial.trial_id),
            task_name=trial.task_id,
            trial_name=name,
            trial_uri=trial_dir.as_uri(),
            task_id=hm.LocalTaskId(path=trial.task_id),
            task_checksum=_digest(task, trial.task_id),
            config=cfg,
            agent_info=hm.AgentInfo(name=trial.config_label, version="unknown"),
            agent_result=None
            if usage == (None, None, None)
            else hm.AgentContext(
                n_input_tokens=_int(e.tokens_in),
                n_output_tokens=_int(e.tokens_out),
                cost_usd=e.cost_usd,
                metadata={"usage_source": e.usage_source} if e.usage_source else None,
            ),
            verifier_result=None if e.reward is None else hm.VerifierResult(rewards={"reward": e.reward}),
            exception_info=None
            if exc_type is None
            else hm.ExceptionInfo(exception_type=exc_type, exception_message=_message(e), occurred_at=when),
            started_at=_time(e.started_at),
            finished_at=_time(e.finished_at),
            agent_execution=hm.TimingInfo(started_at=_time(e.started_at), finished_at=_time(e.finished_at)),
        )
        lock = hm.TrialLock(
            task=hm.TaskLock(name=trial.task_id, digest=_digest(task, trial.task_id), path=trial.task_id),
            agent=agents[trial.config_label],
            environment=env,
        )
        _write_model(trial_dir / "config.json", cfg)
        _write_model(trial_dir / "result.json", result)
        _write_model(trial_dir / "lock.json", lock)
        for sub in ("agent", "verifier"):
            (trial_dir / sub).mkdir(exist_ok=True)
        _artifacts(store.db, run_id, trial, e, trial_dir, summary)
        locks.append(lock)
        _count(stats, result, name)
        rewards.setdefault(_eval_key(trial.config_label), []).append(e.reward or 0.0)
        starts += [s for s in (_time(e.started_at),) if s]
        ends += [f for f in (_time(e.finished_at),) if f]
    for key, values in rewards.items():
        stats.evals[key].metrics = [{"mean": sum(values) / len(values)}]  # Harbor's Mean: a missing reward is 0
    stats.n_completed_trials = len(done)
    created = _time(run.created_at) or (min(starts) if starts else datetime.now(UTC).isoformat())
    finished = _time(run.finished_at) or (max(ends) if ends else None)
    attempts = Counter((t.task_id, t.config_label) for t, _ in done)
    _write_model(
        job_dir / "config.json",
        hm.JobConfig(
            job_name=component(run.name or run_id),
            jobs_dir=str(job_dir.parent),
            n_attempts=max(attempts.values(), default=1),
            agents=list(agents.values()),
            tasks=[hm.TaskConfig(path=t) for t in dict.fromkeys(t.task_id for t, _ in done)],
        ),
    )
    _write_model(
        job_dir / "result.json",
        hm.JobResult(
            id=job_id,
            started_at=created,
            updated_at=finished or created,
            finished_at=finished,
            n_total_trials=len(done),
            stats=stats,
        ),
    )
    _write_model(
        job_dir / "lock.json",
        hm.JobLock(
            created_at=datetime.now(UTC).isoformat(),
            trials=locks,
            exported_by=hm.ExportedBy(version=version("headroom"), run_id=run_id, run_name=run.name),
        ),
    )
    return summary


def _eval_key(label: str) -> str:
    """Harbor's evals key for an agent without a model on a trial without a dataset: ``<agent>__adhoc``."""
    return f"{label}__adhoc"


def _count(stats: hm.JobStats, result: hm.TrialResult, name: str) -> None:
    """One trial into the job's stats, as Harbor's ``JobStats.increment`` counts it."""
    ev = stats.evals.setdefault(_eval_key(result.agent_info.name), hm.AgentDatasetStats())
    if result.verifier_result is not None and result.verifier_result.rewards is not None:
        ev.n_trials += 1
        for key, value in result.verifier_result.rewards.items():
            ev.reward_stats.setdefault(key, {}).setdefault(str(value), []).append(name)
    if result.exception_info is not None:
        ev.exception_stats.setdefault(result.exception_info.exception_type, []).append(name)
        ev.n_errors += 1
        stats.n_errored_trials += 1
    ar = result.agent_result
    if ar is not None:
        if ar.n_input_tokens is not None:
            stats.n_input_tokens = (stats.n_input_tokens or 0) + ar.n_input_tokens
        if ar.n_output_tokens is not None:
            stats.n_output_tokens = (stats.n_output_tokens or 0) + ar.n_output_tokens
        if ar.cost_usd is not None:
            stats.cost_usd = (stats.cost_usd or 0.0) + ar.cost_usd
