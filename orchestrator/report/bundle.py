"""Verifiable leaderboard entries: one self-contained, content-addressed file per run.

A bundle holds everything a reader needs to check a published number without
trusting whoever published it: the run's spec, provenance, task digests, every
trial with every try (outcome, reward, timings, tokens, cost, evidence), and the
published report (the same document ``headroom report --format json`` prints).

Artifacts (what each try left: logs dir, output, exec log, gateway transcript) are
carried as a manifest of digests, not content: ``body.artifacts`` lists each one's
trial, try, name, status, kept and original size and the sha256 of its redacted
content. A bundle stays small and publishable (artifacts can be large, and can hold
task material not licensed for redistribution), and anyone holding the store can
check its artifacts against the bundle (``headroom runs verify FILE --store STORE``).

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

from pydantic import ValidationError

import orchestrator
from orchestrator.artifacts import reader as artifacts
from orchestrator.errors import UserError
from orchestrator.report import document
from orchestrator.spec.provenance import read_stored as read_provenance
from orchestrator.store.records import ExecutionRecord, RunRecord, TaskRecord, TrialRecord
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import digest_dir

SCHEMA = "headroom.bundle/1"
_HEX64 = re.compile(r"^(sha256:)?[0-9a-f]{64}$")


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def content_digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


def build(store: Store, run_id: str | None, rules: str | None = None) -> dict[str, Any]:
    """``rules``: the scoring rules the published report shows side by side (verify recomputes the same ones)."""
    info = store.run(run_id)
    run, tasks, trials = store.export_run(info.run_id)
    if not any(e.final for t in trials for e in t.executions):
        raise UserError(f"run {info.run_id} has no finished trials to publish")
    body = {
        "run": {k: v for k, v in asdict(run).items() if k not in ("spec", "provenance")},
        "experiment": run.spec,
        "provenance": run.provenance.to_stored(),
        "tasks": [asdict(t) for t in tasks],
        "trials": [asdict(t) for t in trials],
        "artifacts": artifacts.run_manifest(store.db, info.run_id),
        "published": document.build(store, info.run_id, rules=rules).to_dict(),
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


def _why(exc: Exception) -> str:
    """One line for a malformed part: a validation error's first complaint and where, else the exception's words."""
    if isinstance(exc, ValidationError) and (errors := exc.errors()):
        where = ".".join(str(p) for p in errors[0]["loc"])
        return f"{where}: {errors[0]['msg']}" if where else str(errors[0]["msg"])
    return " ".join(str(exc).split())


def _records(body: dict[str, Any]) -> tuple[RunRecord, list[TaskRecord], list[TrialRecord]]:
    try:
        # Read as a stored row: a bundle of an older headroom reads, a newer one's is refused (a ValueError).
        run = RunRecord(**body["run"], spec=body["experiment"], provenance=read_provenance(body["provenance"]))
        tasks = [TaskRecord(**t) for t in body["tasks"]]
        trials = [
            TrialRecord(**{**t, "executions": [ExecutionRecord(**e) for e in t["executions"]]}) for t in body["trials"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"bundle body is incomplete or malformed ({_why(exc)})") from None
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
            out.append(
                f"{path}: published {len(published)} items, recomputed "
                f"{len(recomputed) if isinstance(recomputed, list) else type(recomputed).__name__}"
            )
            return
        for i, (a, b) in enumerate(zip(published, recomputed)):
            _diff(a, b, f"{path}[{i}]", out)
    elif (
        isinstance(published, (int, float))
        and not isinstance(published, bool)
        and isinstance(recomputed, (int, float))
        and not isinstance(recomputed, bool)
    ):
        if not math.isclose(published, recomputed, rel_tol=1e-9, abs_tol=1e-12):
            out.append(f"{path}: published {published!r}, recomputed {recomputed!r}")
    elif published != recomputed:
        out.append(f"{path}: published {published!r}, recomputed {recomputed!r}")


ARTIFACT_STATUSES = ("stored", "truncated", "dropped", "skipped", "failed")


def check_artifacts(
    body: dict[str, Any], trials: list[TrialRecord], store: Store | None, checks: list[str], problems: list[str]
) -> None:
    """The manifest is well-formed, names tries of the bundle and keeps each try within its cap; with a
    store, every digest is content the store holds and hashes to it."""
    manifest = body.get("artifacts") or []
    if not isinstance(manifest, list):
        problems.append("artifacts: not a list")
        return
    tries = {(t.trial_id, e.try_index) for t in trials for e in t.executions}
    cap = ((body.get("experiment") or {}).get("artifacts") or {}).get("max_bytes_per_try")
    per_try: dict[tuple[Any, Any], int] = {}  # keys as the manifest gives them, not yet validated
    matched = 0
    for i, a in enumerate(manifest):
        where = f"artifacts[{i}]"
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            problems.append(f"{where}: malformed")
            continue
        where = f"artifact {a.get('trial_id')}/{a.get('try_index')}/{a['name']}"
        if (a.get("trial_id"), a.get("try_index")) not in tries:
            problems.append(f"{where}: no such try in the bundle")
        if a.get("status") not in ARTIFACT_STATUSES:
            problems.append(f"{where}: unknown status {a.get('status')!r}")
        has_content = a.get("status") in ("stored", "truncated")
        sha = a.get("sha256")
        if has_content != (isinstance(sha, str) and bool(re.fullmatch(r"[0-9a-f]{64}", sha))):
            problems.append(f"{where}: status {a.get('status')} with sha256 {sha!r}")
        size = a.get("size")
        if not isinstance(size, int) or size < 0:
            problems.append(f"{where}: size {size!r}")
            continue
        per_try[(a.get("trial_id"), a.get("try_index"))] = (
            per_try.get((a.get("trial_id"), a.get("try_index")), 0) + size
        )
        if store is not None and has_content and isinstance(sha, str):
            if _stored_digest(store, sha) == (sha, size):
                matched += 1
            else:
                problems.append(f"{where}: the store has no content with sha256 {sha} and {size} bytes")
    if isinstance(cap, int):
        for (trial_id, try_index), total in sorted(per_try.items(), key=str):
            if total > cap:
                problems.append(f"artifacts of {trial_id} try {try_index}: {total} bytes, above the cap of {cap}")
    checks.append(
        f"{len(manifest)} artifact digests well-formed, of tries in the bundle, within the per-try cap "
        "(the bundle carries digests, not content)"
    )
    if store is not None:
        with_content = sum(1 for a in manifest if isinstance(a, dict) and a.get("status") in ("stored", "truncated"))
        checks.append(f"{matched}/{with_content} artifacts found in the store with content hashing to their digests")


def _stored_digest(store: Store, sha: str) -> tuple[str, int] | None:
    digest, size = hashlib.sha256(), 0
    try:
        for piece in artifacts.stream(store.db, sha):
            digest.update(piece)
            size += len(piece)
    except (KeyError, ValueError):
        return None
    return digest.hexdigest(), size


def verify(
    bundle: dict[str, Any], *, file_name: str | None = None, tasks_dir: Path | None = None, store: Store | None = None
) -> dict[str, Any]:
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
    published_by = run.provenance.orchestrator.version if run.provenance.orchestrator else None
    if published_by and published_by != orchestrator.__version__:
        checks.append(
            f"note: published by headroom {published_by}, recomputed with headroom {orchestrator.__version__}; "
            "a field the two versions compute differently shows as a mismatch"
        )
    for t in tasks:
        if t.digest != "unrecorded" and not _HEX64.match(t.digest):
            problems.append(f"task {t.task_id}: digest {t.digest!r} is not a sha256")
    try:
        stated = read_provenance((body.get("published") or {}).get("provenance") or {}).tasks
    except ValueError as exc:
        problems.append(f"the published report's provenance is malformed ({_why(exc)})")
        stated = {}
    for t in tasks:
        if t.task_id in stated and stated[t.task_id].digest != t.digest:
            problems.append(
                f"task {t.task_id}: the report states digest {stated[t.task_id].digest}, the bundle {t.digest}"
            )
    unrecorded = sum(1 for t in tasks if t.digest == "unrecorded")
    recorded = len(tasks) - unrecorded
    if recorded:
        checks.append(f"{recorded} task digests well-formed and consistent with the report")
    if unrecorded:
        checks.append(
            f"note: {unrecorded} task digest(s) unrecorded (the source gave none, or its trials disagreed): "
            "the task content of those cannot be checked"
        )
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
    check_artifacts(body, trials, store, checks, problems)
    with tempfile.TemporaryDirectory(prefix="headroom-verify-") as tmp:
        with Store(Path(tmp) / "verify.db") as store:
            try:
                store.import_run(run, tasks, trials)
            except ValueError as exc:
                problems.append(f"trials: {exc}")
                return {"ok": False, "checks": checks, "problems": problems, "content_sha256": digest}
            rules = ((body.get("published") or {}).get("statistics") or {}).get("scoring_rules", {}).get("requested")
            recomputed = document.build(store, run.run_id, rules=",".join(rules) if rules else None).to_dict()
    mismatches: list[str] = []
    _diff(body.get("published") or {}, recomputed, "report", mismatches)
    n_values = _count(body.get("published") or {})
    if mismatches:
        problems += mismatches
    else:
        checks.append(f"all {n_values} published values recomputed from {len(trials)} trials")
    return {
        "ok": not problems,
        "checks": checks,
        "problems": problems,
        "content_sha256": digest,
        "run_id": run.run_id,
        "trials": len(trials),
    }


def _count(x: Any) -> int:
    if isinstance(x, dict):
        return sum(_count(v) for v in x.values())
    if isinstance(x, list):
        return sum(_count(v) for v in x)
    return 1
