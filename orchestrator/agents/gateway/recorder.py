"""What the gateway keeps of each call: a row of ``model_calls`` and a line of the try's transcript.

Rows are written by one thread of their own, so the gateway's event loop never waits
on the store; :meth:`CallLog.flush` waits until every call handed over is written.
The transcript (request and response bodies, one JSON line per call) is spooled to a
private file per try and becomes the try's ``gateway/calls.jsonl`` artifact, redacted
by the artifact sink, when the try is recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.agentio.redact import redact_text
from orchestrator.agentio.text import valid_text
from orchestrator.agents.gateway.usage import Usage
from orchestrator.artifacts.sink import TryKey
from orchestrator.spec.facts import ModelUsage

#: One call's request or response body in the transcript is cut here (the artifact cap bounds the whole).
MAX_BODY = 4 * 1024 * 1024
REJECTED = "rejected:"
#: Pauses before the second, third and fourth try of a row the store would not take (each times its try number).
WRITE_PAUSES_S = (0.05, 0.2, 0.5)


@dataclass
class Call:
    key: TryKey
    started_at: str
    api: str
    path: str
    status: int
    latency_s: float
    streamed: bool
    usage: Usage = field(default_factory=Usage)
    request_model: str | None = None
    cost_usd: float | None = None
    error: str | None = None
    request: bytes = b""
    response: bytes = b""
    failure: str | None = None  # orchestrator.agents.gateway.failures: the class, if the call failed
    retry_after: float | None = None  # seconds the provider's Retry-After asked for
    usage_missing: bool = False  # a 2xx that ended without the provider's final usage
    started_mono: float = 0.0
    token: str = ""  # the try's key as the agent gave it: redacted from the row like the upstream keys

    @property
    def model(self) -> str | None:
        return self.usage.model or self.request_model


def _body(data: bytes) -> Any:
    cut = len(data) > MAX_BODY
    text = data[:MAX_BODY].decode("utf-8", "replace")
    if not cut:
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text + (f"\n… ({len(data) - MAX_BODY} more bytes)" if cut else "")


class CallLog:
    def __init__(self, store_path: Path, secrets: list[str]) -> None:
        self._secrets = secrets
        self._db = sqlite3.connect(store_path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._spool = Path(tempfile.mkdtemp(prefix="headroom-gateway-"))  # 0700: bodies stay private
        self._queue: queue.Queue[Call | None] = queue.Queue()
        #: calls whose row the store would not take, after retries: their usage still counts (from here), and the
        #: try's usage is marked incomplete (ModelUsage.unrecorded_calls); the last error, for a debugger
        self._lost: dict[TryKey, list[Call]] = {}
        self._lost_lock = threading.Lock()
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="headroom-gateway-log", daemon=True)
        self._thread.start()

    def submit(self, call: Call) -> None:
        self._queue.put(call)

    def flush(self) -> None:
        self._queue.join()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)
        self._db.close()
        for p in self._spool.iterdir():
            p.unlink(missing_ok=True)
        self._spool.rmdir()

    def transcript(self, key: TryKey) -> Path:
        name = hashlib.sha256(f"{key.run_id}/{key.trial_id}/{key.try_index}".encode()).hexdigest()[:32]
        return self._spool / f"{name}.jsonl"

    def _run(self) -> None:
        while True:
            call = self._queue.get()
            try:
                if call is None:
                    return
                self._record(call)
            finally:
                self._queue.task_done()

    def _record(self, call: Call) -> None:
        """The call's row, tried again after a pause (a busy or briefly full store); then it is kept as lost."""
        for attempt, pause in enumerate((*WRITE_PAUSES_S, None)):
            try:
                self._write(call)
                break
            except Exception as exc:  # noqa: BLE001 -- a call that cannot be recorded must not stop the gateway
                self.last_error = f"{type(exc).__name__}: {exc}"
                # Only the store's own refusals are worth a pause: anything else would fail the same way again.
                if pause is None or not isinstance(exc, sqlite3.DatabaseError):
                    with self._lost_lock:
                        self._lost.setdefault(call.key, []).append(call)
                    break
                time.sleep(pause * (attempt + 1))
        try:  # the transcript keeps its line even when the row is lost: the bodies are evidence
            self._line(call)
        except OSError as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"

    def _secrets_of(self, call: Call) -> list[str]:
        return [*self._secrets, call.token] if call.token else self._secrets

    def _write(self, call: Call) -> None:
        k, u = call.key, call.usage
        # valid text: a model name or an error the agent shaped (a lone surrogate) must not cost the row
        secrets = self._secrets_of(call)
        model = None if call.model is None else valid_text(redact_text(call.model, secrets)[:200])
        error = None if call.error is None else valid_text(redact_text(call.error, secrets)[:2000])
        self._db.execute(
            "INSERT INTO model_calls (run_id, trial_id, try, seq, started_at, api, model, status, latency_s, streamed,"
            " tokens_in, tokens_out, cached_tokens, cost_usd, error) VALUES (?,?,?,"
            " (SELECT COALESCE(MAX(seq), 0) + 1 FROM model_calls WHERE run_id=? AND trial_id=? AND try=?),"
            " ?,?,?,?,?,?,?,?,?,?,?)",
            (
                k.run_id,
                k.trial_id,
                k.try_index,
                k.run_id,
                k.trial_id,
                k.try_index,
                call.started_at,
                call.api,
                model,
                call.status,
                call.latency_s,
                int(call.streamed),
                u.tokens_in,
                u.tokens_out,
                u.cached if u.known else None,
                call.cost_usd,
                error,
            ),
        )

    def _line(self, call: Call) -> None:
        k, u = call.key, call.usage
        secrets = self._secrets_of(call)
        model = None if call.model is None else redact_text(call.model, secrets)[:200]
        error = None if call.error is None else redact_text(call.error, secrets)[:2000]
        line = {
            "started_at": call.started_at,
            "api": call.api,
            "path": call.path,
            "model": model,
            "status": call.status,
            "latency_s": round(call.latency_s, 6),
            "streamed": call.streamed,
            "tokens_in": u.tokens_in,
            "tokens_out": u.tokens_out,
            "cached_tokens": u.cached,
            "cost_usd": call.cost_usd,
            "error": error,
            "failure": call.failure,
            "retry_after_s": call.retry_after,
            "request": _body(call.request),
            "response": _body(call.response),
        }
        fd = os.open(self.transcript(k), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as f:
            f.write(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")

    def usage(self, key: TryKey) -> ModelUsage:
        """The try's calls so far, summed (every call handed over is written first)."""
        self.flush()
        k = key
        rows = self._db.execute(
            "SELECT model, status, tokens_in, tokens_out, cached_tokens, cost_usd, error FROM model_calls "
            "WHERE run_id=? AND trial_id=? AND try=?",
            (k.run_id, k.trial_id, k.try_index),
        ).fetchall()
        with self._lost_lock:
            lost = self._lost.pop(key, [])
        rows += [
            (c.model, c.status, c.usage.tokens_in, c.usage.tokens_out, c.usage.cached, c.cost_usd, c.error)
            for c in lost
        ]
        counted = [r for r in rows if not (r[6] or "").startswith(REJECTED)]
        unpriced = sorted({r[0] or "?" for r in counted if (r[2] is not None or r[3] is not None) and r[5] is None})
        statuses: dict[str, int] = {}
        for r in counted:
            statuses[str(r[1])] = statuses.get(str(r[1]), 0) + 1
        return ModelUsage(
            calls=len(counted),
            tokens_in=sum(r[2] or 0 for r in counted),
            tokens_out=sum(r[3] or 0 for r in counted),
            cached_tokens=sum(r[4] or 0 for r in counted),
            cost_usd=None if unpriced else float(sum(r[5] or 0.0 for r in counted)),
            unpriced_models=unpriced,
            models=sorted({r[0] for r in counted if r[0]}),
            statuses=statuses,
            rejected_after_end=len(rows) - len(counted),
            unrecorded_calls=len(lost),
        )
