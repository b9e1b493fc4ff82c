"""The report as data: one JSON-serialisable document that every renderer reads.

Renderers never compute statistics; they only lay out this document. The
statistics themselves come from :mod:`orchestrator.stats`.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.stats.proportions import wilson
from orchestrator.store.sqlite import Store

SCHEMA = "headroom.report/1"


def _config_order(df: pd.DataFrame) -> list[tuple[str, float, float | None]]:
    seen = df.drop_duplicates("config_label")[["config_label", "request_multiplier", "limit_multiplier"]]
    rows = [(r.config_label, float(r.request_multiplier), None if pd.isna(r.limit_multiplier) else float(r.limit_multiplier))
            for r in seen.itertuples()]
    return sorted(rows, key=lambda r: (math.inf if r[2] is None else r[2], r[1], r[0]))


def configuration_blocks(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per configuration: counts of each outcome and infra reason, pass and infra-error rates with Wilson 95%."""
    blocks = []
    for label, req, lim in _config_order(df):
        sub = df[df["config_label"] == label]
        n = len(sub)
        counts = {o.value: int((sub["outcome"] == o.value).sum()) for o in Outcome}
        infra = sub[sub["outcome"] == Outcome.INFRA_ERROR.value]["reason"].value_counts()
        blocks.append({
            "label": label,
            "request_multiplier": req,
            "limit_multiplier": lim,
            "enforcement": sorted(sub["enforcement"].dropna().unique().tolist()),
            "qos_class": sorted(sub["qos_class"].dropna().unique().tolist()),
            "trials": n,
            "counts": counts,
            "infra_reasons": {r.value: int(infra.get(r.value, 0)) for r in InfraReason if infra.get(r.value, 0)},
            "pass_rate": wilson(counts["passed"], n).to_dict(),
            "infra_error_rate": wilson(counts["infra_error"], n).to_dict(),
            "peak_memory_bytes_max": None if sub["peak_memory_bytes"].isna().all() else float(sub["peak_memory_bytes"].max()),
        })
    return blocks


def build(store: Store, run_id: str | None = None) -> dict[str, Any]:
    info = store.run(run_id)
    df = store.trial_frame(info.run_id)
    planned = len(store.planned_trials(info.run_id))
    return {
        "schema": SCHEMA,
        "run": {
            "run_id": info.run_id, "name": info.name, "status": info.status, "created_at": info.created_at,
            "finished_at": info.finished_at, "backend": info.backend, "enforcement": info.enforcement,
            "trials_planned": planned, "trials_finished": len(df),
        },
        "experiment": info.spec,
        "provenance": store.provenance(info.run_id),
        "configurations": configuration_blocks(df),
        "tries": store.try_counts(info.run_id),
    }
