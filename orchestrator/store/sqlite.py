"""The embedded store: one SQLite file in WAL mode.

Crash safety comes from the order of writes: a try is recorded as ``running``
before it starts and flipped to ``finished`` (with its result and evidence) in
one transaction. A run killed with ``kill -9`` leaves ``running`` rows, which a
resume marks ``abandoned`` (kept on record, never counted) and runs again.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.classify import Verdict
from orchestrator.errors import UserError
from orchestrator.plan import Trial
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.task import Task


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    name: str
    status: str
    created_at: str
    finished_at: str | None
    backend: str
    enforcement: str
    spec: dict[str, Any]


class Store:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(files("orchestrator.store").joinpath("schema.sql").read_text())

    @classmethod
    def open_existing(cls, path: Path | str) -> "Store":
        p = Path(path)
        if not p.is_file():
            raise UserError("no such store (run `headroom sweep` first)", file=str(p))
        try:
            store = cls(p)
            store.db.execute("SELECT 1 FROM runs LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"not a headroom store ({exc})", file=str(p)) from None
        return store

    def close(self) -> None:
        self.db.close()

    # -- runs -----------------------------------------------------------------------
    def create_run(
        self, *, name: str, backend: str, enforcement: str, spec: dict[str, Any], provenance: dict[str, Any],
        tasks: list[Task], trials: list[Trial],
    ) -> str:
        """Write a run, its provenance and its whole plan in one transaction: all or nothing."""
        run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
        with self._tx():
            self.db.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                (run_id, name, now(), None, "planned", backend, enforcement, json.dumps(spec, sort_keys=True)),
            )
            self.db.execute("INSERT INTO provenance VALUES (?,?)", (run_id, json.dumps(provenance, sort_keys=True)))
            self.db.executemany(
                "INSERT INTO tasks VALUES (?,?,?,?,?)",
                [(run_id, t.id, t.digest, t.cluster_id, t.spec.model_dump_json()) for t in tasks],
            )
            self.db.executemany(
                "INSERT INTO trials VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (run_id, t.trial_id, t.task_id, t.config.label, t.config.request_multiplier,
                     t.config.limit_multiplier, t.attempt, t.seed, t.order)
                    for t in trials
                ],
            )
        return run_id

    def set_status(self, run_id: str, status: str) -> None:
        finished = now() if status == "finished" else None
        self.db.execute("UPDATE runs SET status=?, finished_at=? WHERE run_id=?", (status, finished, run_id))

    def runs(self) -> list[RunInfo]:
        rows = self.db.execute("SELECT * FROM runs ORDER BY created_at").fetchall()
        return [
            RunInfo(r["run_id"], r["name"], r["status"], r["created_at"], r["finished_at"], r["backend"],
                    r["enforcement"], json.loads(r["spec_json"]))
            for r in rows
        ]

    def run(self, run_id: str | None = None) -> RunInfo:
        runs = self.runs()
        if not runs:
            raise UserError("store holds no runs", file=str(self.path))
        if run_id is None:
            return runs[-1]
        for r in runs:
            if r.run_id == run_id:
                return r
        raise UserError(f"no run {run_id!r} (have: {', '.join(r.run_id for r in runs)})", file=str(self.path))

    def provenance(self, run_id: str) -> dict[str, Any]:
        row = self.db.execute("SELECT json FROM provenance WHERE run_id=?", (run_id,)).fetchone()
        prov: dict[str, Any] = json.loads(row["json"]) if row else {}
        prov["tasks"] = {
            r["task_id"]: {"digest": r["digest"], "cluster_id": r["cluster_id"],
                           "provenance": json.loads(r["spec_json"]).get("provenance", {})}
            for r in self.db.execute("SELECT * FROM tasks WHERE run_id=? ORDER BY task_id", (run_id,))
        }
        return prov

    # -- trials and tries --------------------------------------------------------------
    def planned_trials(self, run_id: str) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM trials WHERE run_id=? ORDER BY ord", (run_id,)).fetchall()

    def abandon_running(self, run_id: str) -> int:
        """Tries left 'running' by a crash: keep them on record, never count them."""
        cur = self.db.execute(
            "UPDATE executions SET status='abandoned', finished_at=? WHERE run_id=? AND status='running'", (now(), run_id)
        )
        return cur.rowcount

    def tries(self, run_id: str) -> dict[str, list[sqlite3.Row]]:
        out: dict[str, list[sqlite3.Row]] = {}
        for r in self.db.execute(
            "SELECT trial_id, try, status, outcome, reason, final FROM executions WHERE run_id=? ORDER BY trial_id, try", (run_id,)
        ):
            out.setdefault(r["trial_id"], []).append(r)
        return out

    def start_try(self, run_id: str, trial_id: str, try_index: int) -> None:
        self.db.execute(
            "INSERT INTO executions (run_id, trial_id, try, status, started_at) VALUES (?,?,?,?,?)",
            (run_id, trial_id, try_index, "running", now()),
        )

    def finish_try(self, run_id: str, trial_id: str, try_index: int, facts: TrialFacts, verdict: Verdict, final: bool) -> None:
        ar = facts.agent_result
        with self._tx():
            self.db.execute(
                """UPDATE executions SET status='finished', final=?, finished_at=?, outcome=?, reason=?, reward=?,
                   enforcement=?, qos_class=?, request_cpus=?, request_memory_bytes=?, limit_cpus=?, limit_memory_bytes=?,
                   peak_memory_bytes=?, cpu_time_s=?, duration_s=?, tokens_in=?, tokens_out=?, cost_usd=?
                   WHERE run_id=? AND trial_id=? AND try=?""",
                (int(final), now(), verdict.outcome.value, verdict.reason, facts.reward, facts.enforcement, facts.qos_class,
                 facts.request_cpus, facts.request_memory_bytes, facts.limit_cpus, facts.limit_memory_bytes,
                 facts.peak_memory_bytes, facts.cpu_time_s, facts.duration_s, _num(ar.get("tokens_in")),
                 _num(ar.get("tokens_out")), _num(ar.get("cost_usd")), run_id, trial_id, try_index),
            )
            self.db.execute(
                "INSERT OR REPLACE INTO evidence VALUES (?,?,?,?)", (run_id, trial_id, try_index, facts.model_dump_json())
            )

    def evidence(self, run_id: str, trial_id: str) -> list[dict[str, Any]]:
        return [
            {"try": r["try"], **json.loads(r["json"])}
            for r in self.db.execute("SELECT * FROM evidence WHERE run_id=? AND trial_id=? ORDER BY try", (run_id, trial_id))
        ]

    # -- analysis input ------------------------------------------------------------------
    def trial_frame(self, run_id: str) -> pd.DataFrame:
        """One row per planned trial with a final result: the statistics' input (see orchestrator.stats).

        Built for a million rows: only the columns the statistics read, no ORDER BY,
        tuples instead of Row objects, and the task -> cluster map joined in pandas.
        """
        cur = self.db.cursor()
        cur.row_factory = None
        cur.execute(
            """SELECT t.task_id, t.config_label, t.request_multiplier, t.limit_multiplier, t.attempt,
                      e.outcome, e.reason, e.duration_s, e.cost_usd, e.tokens_in, e.tokens_out,
                      e.peak_memory_bytes, e.limit_memory_bytes AS memory_limit_bytes
               FROM executions e JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
               WHERE e.run_id = ? AND e.final = 1""",
            (run_id,),
        )
        df = pd.DataFrame(cur.fetchall(), columns=[c[0] for c in cur.description])
        clusters = dict(self.db.execute("SELECT task_id, cluster_id FROM tasks WHERE run_id=?", (run_id,)).fetchall())
        df["cluster_id"] = df["task_id"].map(clusters)
        for col in ("request_multiplier", "limit_multiplier", "duration_s", "cost_usd", "tokens_in", "tokens_out",
                    "peak_memory_bytes", "memory_limit_bytes"):
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
        return df

    def config_facts(self, run_id: str) -> dict[str, dict[str, list[str]]]:
        """Per configuration: the enforcement mechanisms and QoS classes its final tries ran under."""
        out: dict[str, dict[str, list[str]]] = {}
        for label, enforcement, qos in self.db.execute(
            """SELECT DISTINCT t.config_label, e.enforcement, e.qos_class
               FROM executions e JOIN trials t ON t.run_id = e.run_id AND t.trial_id = e.trial_id
               WHERE e.run_id = ? AND e.final = 1""",
            (run_id,),
        ).fetchall():
            facts = out.setdefault(label, {"enforcement": [], "qos_class": []})
            for key, value in (("enforcement", enforcement), ("qos_class", qos)):
                if value is not None and value not in facts[key]:
                    facts[key] = sorted([*facts[key], value])
        return out

    def planned_labels(self, run_id: str) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT DISTINCT config_label FROM trials WHERE run_id=?", (run_id,))}

    def planned_count(self, run_id: str) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM trials WHERE run_id=?", (run_id,)).fetchone()[0])

    def try_counts(self, run_id: str) -> dict[str, int]:
        """Raw accounting: every finished or abandoned try, retries included."""
        rows = self.db.execute(
            "SELECT status, outcome, COUNT(*) n FROM executions WHERE run_id=? GROUP BY status, outcome", (run_id,)
        )
        out: dict[str, int] = {}
        for r in rows:
            key = r["outcome"] if r["status"] == "finished" else r["status"]
            out[key] = out.get(key, 0) + r["n"]
        return out

    # -- plumbing ----------------------------------------------------------------------
    def _tx(self) -> "_Tx":
        return _Tx(self.db)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
