"""Copy an Experiment's Trials into a local SQLite store, so `report` and `compare` work unchanged.

The store gets what a local run would have written: the run with the experiment spec and
provenance, the tasks with their digests, the whole plan (recomputed from the spec, the
same seeded plan the controller ran), and one execution per Trial with its facts as
evidence. Trials still running are copied as running tries.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.controller import taskimage, tasksets
from orchestrator.controller.resources import (
    EXPERIMENT_PLURAL,
    GROUP,
    LABEL_EXPERIMENT,
    TRIAL_PLURAL,
    VERSION,
    ExperimentResourceSpec,
)
from orchestrator.engine import overcommit, provenance
from orchestrator.engine.plan import plan
from orchestrator.errors import UserError
from orchestrator.spec.backend import BackendFacts, ClusterFacts
from orchestrator.spec.evidence import Evidence
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.outcome import Outcome, current_outcome, parse_reason
from orchestrator.spec.provenance import ClusterRecord
from orchestrator.spec.trial import Verdict
from orchestrator.store.sqlite import Store


@dataclass
class ExportResult:
    run_id: str
    trials: int
    tries: int
    unfinished: int


def facts_of(trial: dict[str, Any]) -> TrialFacts:
    """The try's facts: the evidence when it is whole, else rebuilt from the status fields."""
    st = trial.get("status") or {}
    evidence = st.get("evidence")
    if isinstance(evidence, dict) and not st.get("evidenceTruncated"):
        try:
            return TrialFacts.from_stored(evidence)  # a Trial written by this or an earlier controller
        except ValidationError:
            pass
    return TrialFacts(
        enforcement=st.get("enforcement") or "kubernetes",
        request_cpus=st.get("requestCpus") or 0.0,
        request_memory_bytes=st.get("requestMemoryBytes") or 0,
        limit_cpus=st.get("limitCpus"),
        limit_memory_bytes=st.get("limitMemoryBytes"),
        qos_class=st.get("qosClass") or "unknown",
        reward=st.get("reward"),
        peak_memory_bytes=st.get("peakMemoryBytes"),
        duration_s=st.get("durationSeconds") or 0.0,
        extra=Evidence(
            trial=trial["metadata"]["name"],
            evidence=evidence if isinstance(evidence, dict) else None,
            evidence_truncated=True,
        ),
    )


def export(kube: Any, name: str, store_path: Path, *, argv: list[str] | None = None) -> ExportResult:
    exp = kube.call(
        f"get Experiment {name}",
        kube.custom.get_namespaced_custom_object,
        GROUP,
        VERSION,
        kube.namespace,
        EXPERIMENT_PLURAL,
        name,
    )
    status = exp.get("status") or {}
    run_id = status.get("runId")
    if not run_id:
        raise UserError(f"Experiment {name} has not started yet (no run id in its status)")
    spec = ExperimentResourceSpec.model_validate(exp["spec"])
    trials = kube.call(
        "list Trials",
        kube.custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        kube.namespace,
        TRIAL_PLURAL,
        label_selector=f"{LABEL_EXPERIMENT}={name}",
    )["items"]
    trials = [t for t in trials if t["spec"].get("runId") == run_id]
    with tempfile.TemporaryDirectory(prefix="headroom-export-") as scratch:
        source = spec.task_source
        if source.image is not None:  # the catalog the controller cached (export never runs a catalog pod)
            cat = kube.call("read the task catalog", taskimage.cached_catalog, kube.core, kube.namespace, source.image)
            tasks, _ = taskimage.load_set(cat, source.image, Path(scratch), spec.tasks)
            where = f"image:{source.image}"
        else:
            tasks = kube.call(
                "read the task set",
                tasksets.load_set,
                kube.core,
                kube.namespace,
                source.bundle,
                Path(scratch),
                spec.tasks,
            )
            where = f"configmap:{source.bundle}"
        experiment = spec.model_copy(update={"tasks_dir": where})
        planned = plan(experiment, tasks)
        planned_ids = {p.trial_id for p in planned}
        strangers = sorted({t["spec"]["trialId"] for t in trials} - planned_ids)
        if strangers:
            raise UserError(f"Trials not in the Experiment's plan: {', '.join(strangers[:5])}")
        store = Store(store_path)
        for r in store.runs():
            if (cluster := store.provenance(r.run_id).cluster) is not None and cluster.run_id == run_id:
                raise UserError(
                    f"{name} (run {run_id}) is already in this store as run {r.run_id}", file=str(store_path)
                )
        version = _server_version(kube)
        # the cluster's facts as the controller recorded them when the run started (an older controller's flat
        # dict reads too); without them, the server's version alone
        facts = (
            BackendFacts.from_stored(status["cluster"])
            if status.get("cluster")
            else BackendFacts(
                name="kubernetes",
                kubernetes=ClusterFacts(namespace=kube.namespace, server_version={"git_version": version}),
            )
        )
        prov = provenance.collect(facts, argv)
        # the warning a CLI sweep prints before its run, from the nodes the controller recorded when it started
        prov.overcommit = overcommit.warnings_for(experiment, tasks, None, overcommit.node_capacities(facts))
        prov.cluster = ClusterRecord(
            namespace=kube.namespace,
            experiment=name,
            uid=exp["metadata"]["uid"],
            run_id=run_id,
            server_version=version,
            task_set=source.bundle or source.image,
            started_at=status.get("startedAt"),
            completed_at=status.get("completedAt"),
        )
        local_id = store.create_run(
            name=spec.name,
            backend="kubernetes",
            enforcement="kubernetes",
            spec=json.loads(json.dumps(spec.model_dump(mode="json", exclude={"tasks_dir"}))),
            provenance=prov,
            tasks=tasks,
            trials=planned,
        )
    unfinished = 0
    for t in sorted(trials, key=lambda t: (t["spec"]["trialId"], t["spec"]["try"])):
        tid, try_index = t["spec"]["trialId"], t["spec"]["try"]
        store.start_try(local_id, tid, try_index)
        st = t.get("status") or {}
        if st.get("phase") != "Finished":
            unfinished += 1
            continue
        outcome, reason = current_outcome(st["outcome"], st.get("reason"))  # a Trial settled by an older controller
        verdict = Verdict(Outcome(outcome), parse_reason(reason))  # type: ignore[arg-type]  # a Finished Trial has an outcome
        store.finish_try(local_id, tid, try_index, facts_of(t), verdict, final=bool(st.get("final")))
    store.set_status(local_id, "finished" if status.get("phase") == "Complete" else "running")
    store.close()
    return ExportResult(local_id, len({t["spec"]["trialId"] for t in trials}), len(trials), unfinished)


def _server_version(kube: Any) -> str | None:
    from orchestrator.kube.api import client

    try:
        return str(client.VersionApi(kube.api).get_code().git_version)
    except Exception:  # provenance is best effort; the export itself must not fail on it
        return None
