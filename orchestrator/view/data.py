"""What the viewer reads from a store: small, read-only queries, one per page.

Every function takes a :class:`Store` opened read-only; nothing here writes.
The run page's numbers come from the report document (the same one
``headroom report`` renders), so the viewer and the reports never disagree.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from orchestrator.report import document
from orchestrator.report.labels import agent_label
from orchestrator.report.model import ReportDocument
from orchestrator.spec.evidence import evidence_path
from orchestrator.spec.outcome import OUTCOME_SQL, REASON_SQL, current_outcome
from orchestrator.spec.provenance import Provenance
from orchestrator.store.sqlite import Store

UNKNOWN = "unknown"


def isolation_of(prov: Provenance) -> str:
    """The run's isolation as its backend declared it; "unknown" for runs recorded before it was,
    "unknown (imported)" for results headroom did not run (early versions wrote it at the top level)."""
    if prov.import_:
        return document.IMPORTED_UNKNOWN
    caps = prov.backend.abilities if prov.backend else None
    return str(caps.isolation if caps else prov.legacy.get("isolation") or UNKNOWN)


def runs_overview(store: Store) -> list[dict[str, Any]]:
    """Every run, newest first, with its trial counts and isolation."""
    planned = dict(store.db.execute("SELECT run_id, COUNT(*) FROM trials GROUP BY run_id").fetchall())
    finished = dict(
        store.db.execute("SELECT run_id, COUNT(*) FROM executions WHERE final = 1 GROUP BY run_id").fetchall()
    )
    out = []
    for r in reversed(store.runs()):
        out.append(
            {
                "run_id": r.run_id,
                "name": r.name,
                "status": r.status,
                "backend": r.backend,
                "enforcement": r.enforcement,
                "isolation": isolation_of(store.provenance(r.run_id)),
                "created_at": r.created_at,
                "finished_at": r.finished_at,
                "planned": int(planned.get(r.run_id, 0)),
                "finished": int(finished.get(r.run_id, 0)),
                "model": (r.spec.get("model") or {}).get("name"),
                "agent": agent_label(r.spec.get("agent") or {}),  # its name, never "external" or "imported"
            }
        )
    return out


def cell_trials(store: Store, run_id: str, task_id: str, label: str) -> list[dict[str, Any]]:
    """The trials of one task under one configuration, each with its tries in order; a try whose agent could not
    start (exit 126/127, or harness_error(agent_not_found)) is marked ``agent_not_found``."""
    rows = store.db.execute(
        f"""SELECT t.trial_id, t.attempt, t.seed, e.try, e.status, e.final, {OUTCOME_SQL} AS outcome,
                  {REASON_SQL} AS reason, e.duration_s,
                  e.peak_memory_bytes, e.limit_memory_bytes,
                  (e.reason IS 'agent_not_found' OR json_extract(v.json, '{evidence_path("agent_not_found")}')
                      IS NOT NULL) AS agent_not_found,
                  json_extract(v.json, '{evidence_path("agent_not_found", "exit_code")}') AS agent_exit_code
           FROM trials t LEFT JOIN executions e ON e.run_id = t.run_id AND e.trial_id = t.trial_id
           LEFT JOIN evidence v ON v.run_id = e.run_id AND v.trial_id = e.trial_id AND v.try = e.try
           WHERE t.run_id = ? AND t.task_id = ? AND t.config_label = ?
           ORDER BY t.attempt, e.try""",
        (run_id, task_id, label),
    ).fetchall()
    trials: dict[str, dict[str, Any]] = {}
    for r in rows:
        t = trials.setdefault(
            r["trial_id"],
            {"trial_id": r["trial_id"], "attempt": r["attempt"], "seed": r["seed"], "tries": [], "final": None},
        )
        if r["try"] is None:
            continue
        one = {
            k: r[k]
            for k in (
                "try",
                "status",
                "outcome",
                "reason",
                "duration_s",
                "peak_memory_bytes",
                "limit_memory_bytes",
                "agent_exit_code",
            )
        }
        one["agent_not_found"] = bool(r["agent_not_found"])  # the agent could not start (exit 126/127)
        t["tries"].append(one)
        if r["final"]:
            t["final"] = one
    return list(trials.values())


def trial_detail(store: Store, run_id: str, trial_id: str) -> dict[str, Any] | None:
    """One trial: its plan row, every try (result columns and evidence), or None if no such trial."""
    plan = store.db.execute("SELECT * FROM trials WHERE run_id = ? AND trial_id = ?", (run_id, trial_id)).fetchone()
    if plan is None:
        return None
    evidence = {e.pop("try"): e for e in store.evidence(run_id, trial_id)}  # the JSON exactly as recorded
    tries = []
    for r in store.db.execute(
        "SELECT * FROM executions WHERE run_id = ? AND trial_id = ? ORDER BY try", (run_id, trial_id)
    ).fetchall():
        row = dict(r)
        row["outcome"], row["reason"] = current_outcome(row["outcome"], row["reason"])
        ev = evidence.get(row["try"])
        steps = []
        for name in ("agent", "verifier"):
            s = (ev or {}).get(name)
            if s:
                steps.append({"name": s.get("name") or name, **s})
        tries.append(
            {
                **row,
                "evidence": ev,
                "evidence_json": json.dumps(ev, indent=2, sort_keys=True) if ev else None,
                "steps": steps,
            }
        )
    return {"plan": dict(plan), "tries": tries}


@dataclass
class DocumentCache:
    """Report documents by run, rebuilt only when the run's results change.

    WHY: a run of a million trials takes seconds to analyse; the run page is
    visited again and again while nothing changes. The key is cheap to read
    (index-only counts and the run's status), and a running sweep changes it
    with every result, so a cached page is never stale.
    """

    entries: dict[tuple[str, str | None, str | None], tuple[tuple[Any, ...], ReportDocument]] = field(
        default_factory=dict
    )
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def key(store: Store, run_id: str) -> tuple[Any, ...]:
        tries = store.try_counts(run_id)
        return (store.run(run_id).status, tuple(sorted(tries.items())))

    def get(self, store: Store, run_id: str, reference: str | None = None, rules: str | None = None) -> ReportDocument:
        """``rules``: the scoring rules to show side by side (``auto``, ``all`` or names)."""
        key = self.key(store, run_id)
        with self.lock:
            hit = self.entries.get((run_id, reference, rules))
            if hit and hit[0] == key:
                return hit[1]
            doc = document.build(store, run_id, reference=reference, rules=rules)
            self.entries[(run_id, reference, rules)] = (key, doc)
            return doc
