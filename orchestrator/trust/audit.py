"""``headroom tasks audit``: duplicates within a task set and against the user's train/dev files.

Output is one JSON record per finding, never only a count, plus proposed
template clusters that the user may accept as each task's ``cluster_id`` (they
then feed the cluster-level and worst-cluster scores).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomlkit

from orchestrator.errors import UserError
from orchestrator.spec.task import Task
from orchestrator.trust.duplicates import Finding, exact_duplicates, near_duplicates, template_clusters
from orchestrator.trust.texts import Item, task_items

Field = Literal["prompt", "prompt+answer"]


@dataclass
class AuditResult:
    findings: list[Finding] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)

    def records(self) -> Iterator[dict[str, Any]]:
        for f in self.findings:
            yield f.record()
        for c in self.clusters:
            yield {"type": "proposed_cluster", **c}


def audit(tasks: list[Task], refs: list[Item], fields: list[Field], threshold: float) -> AuditResult:
    if not 0 < threshold <= 1:
        raise UserError("the threshold is a Jaccard similarity in (0, 1]", field="--threshold")
    result = AuditResult()
    for fld in fields:
        items = task_items(tasks, with_answer=fld == "prompt+answer")
        result.findings += list(exact_duplicates(items, refs, fld))
        result.findings += list(near_duplicates(items, refs, fld, threshold))
    result.clusters = template_clusters(result.findings, [t.id for t in tasks])
    return result


def accept_clusters(tasks: list[Task], clusters: list[dict[str, Any]]) -> list[str]:
    """Write each proposed cluster into its members' ``[provenance] cluster_id``, keeping the files' formatting."""
    by_id = {t.id: t for t in tasks}
    changed = []
    for c in clusters:
        for member in c["members"]:
            path = Path(by_id[member].path) / "task.toml"
            doc = tomlkit.parse(path.read_text(encoding="utf-8"))
            prov = doc.setdefault("provenance", tomlkit.table())
            if prov.get("cluster_id") != c["cluster_id"]:
                prov["cluster_id"] = c["cluster_id"]
                path.write_text(tomlkit.dumps(doc), encoding="utf-8")
                changed.append(member)
    return changed
