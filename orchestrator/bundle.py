"""Verifiable leaderboard entries: one self-contained, content-addressed file per run.

A bundle holds everything a reader needs to check a published number without
trusting whoever published it: the run's spec, provenance, task digests, every
trial with every try (outcome, reward, timings, tokens, cost, evidence), and the
published report (the same document ``headroom report --format json`` prints).

``content_sha256`` is the sha256 of the canonical JSON of ``body`` (sorted keys,
no whitespace, UTF-8); the file's default name carries its first 16 hex digits.
``verify`` recomputes that digest, loads the trials into a scratch store and
rebuilds the report from them with this headroom's own statistics, then compares
every published value (numbers within 1e-9 relative) and checks the task digests
(against the task directories too, when given).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orchestrator
from orchestrator.errors import UserError
from orchestrator.report import document
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import digest_dir

SCHEMA = "headroom.bundle/1"
_HEX64 = re.compile(r"^(sha256:)?[0-9a-f]{64}$")


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def content_digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


def build(store: Store, run_id: str | None) -> dict[str, Any]:
    info = store.run(run_id)
    run, tasks, trials = store.export_run(info.run_id)
    if not any(e.final for t in trials for e in t.executions):
        raise UserError(f"run {info.run_id} has no finished trials to publish")
    body = {
        "run": {k: v for k, v in asdict(run).items() if k not in ("spec", "provenance")},
        "experiment": run.spec,
        "provenance": run.provenance,
        "tasks": [asdict(t) for t in tasks],
        "trials": [asdict(t) for t in trials],
        "published": json.loads(json.dumps(document.build(store, info.run_id), allow_nan=False)),
    }
    return {"schema": SCHEMA, "content_sha256": content_digest(body), "body": body}


def default_name(bundle: dict[str, Any]) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", bundle["body"]["run"]["name"]).strip("-") or "run"
    return f"{name}-{bundle['content_sha256'][:16]}.headroom-bundle.json"


def write(bundle: dict[str, Any], output: Path) -> Path:
    path = output / default_name(bundle) if output.is_dir() else output
    try:
        path.write_bytes(canonical(bundle) + b"\n")
    except OSError as exc:
        raise UserError(f"cannot write the bundle ({exc.strerror})", file=str(path)) from None
    return path


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror})", file=str(path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"not a bundle: malformed JSON ({exc})", file=str(path)) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("body"), dict):
        raise UserError(f"not a headroom bundle (expected schema {SCHEMA})", file=str(path))
    return data


def _records(body: dict[str, Any]) -> tuple[RunRecord, list[TaskRecord], list[TrialRecord]]:
    try:
        run = RunRecord(**body["run"], spec=body["experiment"], provenance=body["provenance"])
        tasks = [TaskRecord(**t) for t in body["tasks"]]
        trials = [TrialRecord(**{**t, "executions": [ExecutionRecord(**e) for e in t["executions"]]})
                  for t in body["trials"]]
    except (KeyError, TypeError) as exc:
        raise UserError(f"bundle body is incomplete or malformed ({exc})") from None
    return run, tasks, trials


def _diff(published: Any, recomputed: Any, path: str, out: list[str]) -> None:
    """Every published value must be recomputed equal (numbers within 1e-9 relative)."""
    if isinstance(published, dict):
        if not isinstance(recomputed, dict):
            out.append(f"{path}: published an object, recomputed {type(recomputed).__name__}")
            return
        for k, v in published.items():
            if k not in recomputed:
                out.append(f"{path}.{k}: published but not recomputed")
            else:
                _diff(v, recomputed[k], f"{path}.{k}", out)
    elif isinstance(published, list):
        if not isinstance(recomputed, list) or len(recomputed) != len(published):
            out.append(f"{path}: published {len(published)} items, recomputed "
                       f"{len(recomputed) if isinstance(recomputed, list) else type(recomputed).__name__}")
            return
        for i, (a, b) in enumerate(zip(published, recomputed)):
            _diff(a, b, f"{path}[{i}]", out)
    elif isinstance(published, (int, float)) and not isinstance(published, bool) \
            and isinstance(recomputed, (int, float)) and not isinstance(recomputed, bool):
        if not math.isclose(published, recomputed, rel_tol=1e-9, abs_tol=1e-12):
            out.append(f"{path}: published {published!r}, recomputed {recomputed!r}")
    elif published != recomputed:
        out.append(f"{path}: published {published!r}, recomputed {recomputed!r}")


def verify(bundle: dict[str, Any], *, file_name: str | None = None, tasks_dir: Path | None = None) -> dict[str, Any]:
    """Check a bundle; returns {"ok": bool, "checks": [...], "problems": [...]}. Nothing is trusted but the trials."""
    body = bundle["body"]
    checks: list[str] = []
    problems: list[str] = []
    digest = content_digest(body)
    if digest != bundle.get("content_sha256"):
        problems.append(f"content digest: the file says {bundle.get('content_sha256')}, its body hashes to {digest}")
    else:
        checks.append(f"content digest sha256:{digest}")
    if file_name:
        m = re.search(r"-([0-9a-f]{16})\.headroom-bundle\.json$", file_name)
        if m and not digest.startswith(m.group(1)):
            problems.append(f"file name carries digest {m.group(1)}, the body hashes to {digest[:16]}")
    run, tasks, trials = _records(body)
    published_by = (body.get("provenance") or {}).get("orchestrator", {}).get("version")
    if published_by and published_by != orchestrator.__version__:
        checks.append(f"note: published by headroom {published_by}, recomputed with headroom {orchestrator.__version__}; "
                      "a field the two versions compute differently shows as a mismatch")
    for t in tasks:
        if t.digest != "unrecorded" and not _HEX64.match(t.digest):
            problems.append(f"task {t.task_id}: digest {t.digest!r} is not a sha256")
    stated = (body.get("published") or {}).get("provenance", {}).get("tasks", {})
    for t in tasks:
        if t.task_id in stated and stated[t.task_id].get("digest") != t.digest:
            problems.append(f"task {t.task_id}: the report states digest {stated[t.task_id].get('digest')}, the bundle {t.digest}")
    checks.append(f"{len(tasks)} task digests well-formed and consistent with the report")
    if tasks_dir is not None:
        matched = 0
        for t in tasks:
            d = tasks_dir / t.task_id
            if not d.is_dir():
                problems.append(f"task {t.task_id}: not found in {tasks_dir}")
            elif not _HEX64.match(t.digest) or t.digest.startswith("sha256:"):
                problems.append(f"task {t.task_id}: digest {t.digest} was not made by headroom; cannot compare")
            elif digest_dir(d) != t.digest:
                problems.append(f"task {t.task_id}: the directory's content differs from the digest in the bundle")
            else:
                matched += 1
        checks.append(f"{matched}/{len(tasks)} task directories match their digests")
    ids = [t.trial_id for t in trials]
    if len(set(ids)) != len(ids):
        problems.append("a trial id appears twice")
    with tempfile.TemporaryDirectory(prefix="headroom-verify-") as tmp:
        store = Store(Path(tmp) / "verify.db")
        try:
            try:
                store.import_run(run, tasks, trials)
            except ValueError as exc:
                problems.append(f"trials: {exc}")
                return {"ok": False, "checks": checks, "problems": problems, "content_sha256": digest}
            recomputed = json.loads(json.dumps(document.build(store, run.run_id), allow_nan=False))
        finally:
            store.close()
    mismatches: list[str] = []
    _diff(body.get("published") or {}, recomputed, "report", mismatches)
    n_values = _count(body.get("published") or {})
    if mismatches:
        problems += mismatches
    else:
        checks.append(f"all {n_values} published values recomputed from {len(trials)} trials")
    return {"ok": not problems, "checks": checks, "problems": problems, "content_sha256": digest,
            "run_id": run.run_id, "trials": len(trials)}


def _count(x: Any) -> int:
    if isinstance(x, dict):
        return sum(_count(v) for v in x.values())
    if isinstance(x, list):
        return sum(_count(v) for v in x)
    return 1
