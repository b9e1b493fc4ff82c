"""The viewer's artifact pages: a try's artifacts and model calls, one artifact shown the way it reads best.

An artifact is shown as a trajectory (ATIF or chat messages, :mod:`orchestrator.artifacts.trajectory`),
an exec log (:mod:`orchestrator.artifacts.execlog`), the gateway's calls, text (its first
:data:`TEXT_LIMIT` bytes) or, when it is not text, only offered for download. Content is the agent's:
templates escape it, and the download is always ``application/octet-stream`` as an attachment.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from orchestrator.artifacts import execlog, names, reader, trajectory

TEXT_LIMIT = 1024 * 1024


def try_artifacts(db: sqlite3.Connection, run_id: str, trial_id: str) -> dict[int, list[reader.ArtifactInfo]]:
    out: dict[int, list[reader.ArtifactInfo]] = {}
    for a in reader.list_artifacts(db, run_id, trial_id):
        out.setdefault(a.try_index, []).append(a)
    return out


def model_calls(db: sqlite3.Connection, run_id: str, trial_id: str) -> dict[int, list[dict[str, Any]]]:
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='model_calls'").fetchone() is None:
        return {}
    out: dict[int, list[dict[str, Any]]] = {}
    cur = db.execute("SELECT * FROM model_calls WHERE run_id=? AND trial_id=? ORDER BY try, seq", (run_id, trial_id))
    cols = [c[0] for c in cur.description]
    for row in cur:
        r = dict(zip(cols, row))
        out.setdefault(r["try"], []).append(r)
    return out


def _is_text(data: bytes) -> bool:
    if b"\x00" in data[:8192]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(data) - 4  # only a character cut at the limit
    return True


def artifact_view(
    db: sqlite3.Connection, run_id: str, trial_id: str, try_index: int, name: str
) -> dict[str, Any] | None:
    """What the artifact page shows, or None if there is no such artifact."""
    info = reader.find(db, run_id, trial_id, try_index, name)
    if info is None:
        return None
    view: dict[str, Any] = {"info": info, "kind": "none"}
    if not info.readable:
        return view
    head = reader.read(db, info.sha256 or "", limit=max(TEXT_LIMIT, trajectory.MAX_BYTES) + 1)
    if name.endswith((".json", ".traj")) and len(head) <= trajectory.MAX_BYTES:
        if (traj := trajectory.parse(head)) is not None:
            return {**view, "kind": "trajectory", "trajectory": traj}
    if name == names.EXEC_LOG or name.endswith("/" + names.EXEC_LOG):
        return {**view, "kind": "exec", "execs": execlog.parse(head[: trajectory.MAX_BYTES])}
    if name == names.MODEL_CALLS:
        return {**view, "kind": "calls", "calls": _calls(head[: trajectory.MAX_BYTES])}
    text = head[:TEXT_LIMIT]
    if _is_text(text):
        return {**view, "kind": "text", "text": text.decode("utf-8", "replace"), "cut": len(head) > TEXT_LIMIT}
    return {**view, "kind": "binary"}


def _calls(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            call = json.loads(line)
        except ValueError:
            continue
        if isinstance(call, dict):
            call["request_json"] = json.dumps(call.get("request"), indent=1, ensure_ascii=False)[:TEXT_LIMIT]
            resp = call.get("response")
            call["response_text"] = (resp if isinstance(resp, str) else json.dumps(resp, indent=1, ensure_ascii=False))[
                :TEXT_LIMIT
            ]
            out.append(call)
    return out
