"""The provenance registry: every task's ``[provenance]`` fields, and which are missing."""

from __future__ import annotations

from typing import Any

from orchestrator.spec.task import ProvenanceSpec, Task

#: The registry's required fields (``paraphrase_of`` is optional and not one of them).
FIELDS = tuple(f for f in ProvenanceSpec.model_fields if f != "paraphrase_of")
#: The release classes a report groups tasks by; `release_status` names one (e.g. "public", "internal-2025").
ACCESS_CLASSES = ("public", "internal", "synthetic", "closed")


def access_class(provenance: dict[str, Any]) -> str:
    status = str(provenance.get("release_status") or "").strip().lower()
    return next((c for c in ACCESS_CLASSES if status.startswith(c)), "unknown")


def registry(tasks: list[Task]) -> list[dict[str, Any]]:
    rows = []
    for t in tasks:
        prov = t.spec.provenance.model_dump()
        missing = [f for f in FIELDS if not prov.get(f)]
        rows.append({"task_id": t.id, **prov, "access_class": access_class(prov), "missing": missing})
    return rows
