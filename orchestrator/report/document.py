"""The report as data: one JSON-serialisable document that every renderer reads.

Renderers never compute statistics; they lay out this document. The statistics
come from :func:`orchestrator.stats.analyze.analyze`; this module adds what only
the store knows: the run, its provenance, enforcement per configuration, the
raw try accounting (retries, abandoned tries) and the exclusions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from orchestrator.errors import UserError
from orchestrator.report import checks
from orchestrator.stats.analyze import NothingToCompare, analyze, compare_runs
from orchestrator.stats.paraphrase import paraphrase_gap, paraphrase_pairs
from orchestrator.store.frame import config_facts
from orchestrator.store.sqlite import RunInfo, Store
from orchestrator.trust.provenance import ACCESS_CLASSES, access_class

SCHEMA = "headroom.report/1"


def provenance_mix(prov: dict[str, Any]) -> dict[str, Any]:
    """How the task set is made up: sources, licences, release status, clusters."""
    tasks = prov.get("tasks", {})
    fields = ("source", "license_or_access", "release_status", "transformation")
    mix = {f: dict(Counter((t.get("provenance") or {}).get(f) or "unrecorded" for t in tasks.values())) for f in fields}
    clusters = Counter(t.get("cluster_id") for t in tasks.values())
    mix["n_tasks"] = len(tasks)
    mix["n_clusters"] = len(clusters)
    mix["largest_cluster_size"] = max(clusters.values(), default=0)
    mix["missing_provenance"] = sorted(tid for tid, t in tasks.items() if not (t.get("provenance") or {}).get("source"))
    access = Counter(access_class(t.get("provenance") or {}) for t in tasks.values())
    mix["access"] = {c: access.get(c, 0) for c in (*ACCESS_CLASSES, "unknown")}
    mix["unknown_access_share"] = access.get("unknown", 0) / len(tasks) if tasks else None
    return mix


def trust_block(df: pd.DataFrame, prov: dict[str, Any], configs: list[dict[str, Any]]) -> dict[str, Any]:
    """Abstention rates (configurations with any abstention) and the paraphrase gap, when the task set has them."""
    return {
        "abstentions": {c["label"]: c["abstention_rate"] for c in configs if c["abstention_rate"]["k"]},
        "paraphrase_gap": paraphrase_gap(df, paraphrase_pairs(prov.get("tasks", {}))),
    }


def isolation_facts(prov: dict[str, Any]) -> dict[str, Any]:
    """What kept agents away from what grades them, as the backend declared it (``unrecorded`` for old stores)."""
    caps = (prov.get("backend") or {}).get("capabilities") or {}
    return {"isolation": caps.get("isolation", "unrecorded"), "storage_limit": caps.get("storage_limit"),
            "network_control": caps.get("network_control")}


def exclusions(df: pd.DataFrame, tries: dict[str, int], planned: int) -> dict[str, Any]:
    """What the infra-excluded score leaves out, and why; plus tries that never became results."""
    excluded = df[df["outcome"].isin(["infra_error", "harness_error"])]
    reasons = excluded.groupby(["outcome", "reason"], dropna=False, observed=True).size()
    return {
        "excluded_from_infra_excluded_score": sorted(
            ({"outcome": str(o), "reason": None if pd.isna(r) else str(r), "trials": int(n)}
             for (o, r), n in reasons.items() if n),
            key=lambda e: (e["outcome"], e["reason"] or ""),
        ),
        "retried_tries": tries["retried"],
        "abandoned_tries": tries["abandoned"],
        "running_tries": tries["running"],
        "unfinished_trials": int(planned - len(df)),
    }


def _label_order(info: RunInfo) -> list[str] | None:
    """A labels-axis run's configurations in the order the user gave (None: a sweep's canonical order)."""
    order = info.spec.get("configurations") if info.axis == "labels" else None
    return [str(c) for c in order] if isinstance(order, list) else None


def build(store: Store, run_id: str | None = None, reference: str | None = None) -> dict[str, Any]:
    info = store.run(run_id)
    df = store.trial_frame(info.run_id)
    planned = store.planned_count(info.run_id)
    prov = store.provenance(info.run_id)
    tries = store.try_counts(info.run_id)
    stats = analyze(df, reference=reference, axis=info.axis, config_order=_label_order(info)) if len(df) else None
    facts = config_facts(df)
    configurations = [{**c, **facts.get(c["label"], {})} for c in (stats or {}).get("configs", [])]
    doc = {
        "schema": SCHEMA,
        "run": {
            "run_id": info.run_id, "name": info.name, "status": info.status, "created_at": info.created_at,
            "finished_at": info.finished_at, "backend": info.backend, "enforcement": info.enforcement,
            "axis": info.axis, "trials_planned": planned, "trials_finished": len(df),
            **isolation_facts(prov),
        },
        "experiment": info.spec,
        "provenance": prov,
        "task_provenance_mix": provenance_mix(prov),
        "trust": trust_block(df, prov, configurations),
        "configurations": configurations,
        "tries": tries,
        "exclusions": exclusions(df, tries, planned),
        "statistics": {k: v for k, v in (stats or {}).items() if k != "configs"},
    }
    checks.attach(doc, df)  # canary, overcommit, drift (orchestrator/report/checks.py)
    return doc


def build_comparison(store_a: Store, run_a: str | None, store_b: Store, run_b: str | None) -> dict[str, Any]:
    ia, ib = store_a.run(run_a), store_b.run(run_b)
    da, db = store_a.trial_frame(ia.run_id), store_b.trial_frame(ib.run_id)
    for info, frame in ((ia, da), (ib, db)):
        if frame.empty:
            raise UserError(f"run {info.run_id} has no finished trials to compare")
    pa, pb = store_a.provenance(ia.run_id), store_b.provenance(ib.run_id)
    changed_tasks = sorted(
        t for t in set(pa["tasks"]) & set(pb["tasks"]) if pa["tasks"][t]["digest"] != pb["tasks"][t]["digest"]
    )
    try:
        stats = compare_runs(da, db, name_a="A", name_b="B", order_a=_label_order(ia), order_b=_label_order(ib))
    except NothingToCompare as exc:
        raise UserError(f"cannot compare run {ia.run_id} (A) with run {ib.run_id} (B): {exc}") from None
    return {
        "schema": "headroom.comparison/1",
        "a": {"run_id": ia.run_id, "name": ia.name, "model": ia.spec.get("model"), "agent": ia.spec.get("agent"),
              "enforcement": ia.enforcement},
        "b": {"run_id": ib.run_id, "name": ib.name, "model": ib.spec.get("model"), "agent": ib.spec.get("agent"),
              "enforcement": ib.enforcement},
        "tasks_with_different_content": changed_tasks,
        "statistics": stats,
    }
