"""What the controller's Trial cache keeps: a finished Trial's counted fields, its repeated parts shared."""

from __future__ import annotations

import copy
import gc
import json
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from orchestrator.controller.manager import slim_trial
from orchestrator.controller.planned import CompactPlan
from orchestrator.controller.progress import ExperimentStatus, experiment_status, ledger
from tests.controller.test_progress import _experiment, _tasks

OUTCOMES = ["passed", "failed", "infra_error", "timeout"]


def _full(trial_id: str, label: str, i: int, *, finished: bool = True) -> dict[str, Any]:
    """A Trial as the API server returns it (metadata, spec and status with evidence)."""
    outcome = OUTCOMES[i % len(OUTCOMES)]
    status: dict[str, Any] = {"phase": "Running", "node": "n1", "evidence": {"extra": {"x": "y" * 100}}}
    if finished:
        status = {
            "phase": "Finished",
            "outcome": outcome,
            "final": True,
            "reward": 1.0,
            "node": f"node-{i}",
            "timings": {"queued": "2026-11-30T10:00:00Z"},
            "evidence": {"extra": {"events": [{"message": "x" * 200}]}},
            **({"reason": "oom_killed"} if outcome == "infra_error" else {}),
        }
    return {
        "apiVersion": "headroom.dev/v1alpha1",
        "kind": "Trial",
        "metadata": {
            "name": f"r-{i}",
            "namespace": "ns",
            "uid": f"uid-{i}",
            "resourceVersion": str(100 + i),
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"headroom.dev/experiment": "e"},
            "managedFields": [{"manager": "x"}],
        },
        "spec": {
            "experiment": "e",
            "runId": "run-1",
            "trialId": trial_id,
            "task": "t0",
            "try": 0,
            "seed": i,
            "configuration": {"label": label, "requestMultiplier": 1.0},
        },
        "status": status,
    }


def test_finished_trials_keep_their_counted_fields_and_share_the_repeated_parts() -> None:
    p = CompactPlan.of(_experiment(), _tasks(4))  # 24 trials over 3 configurations
    full = [_full(t.trial_id, t.config.label, i) for i, t in enumerate(p)]
    # Each Trial decoded on its own, as the watch and the paged list hand them over.
    slim = [slim_trial(copy.deepcopy(t)) for t in full]
    for f, s in zip(full, slim, strict=True):
        assert s["metadata"] == {"name": f["metadata"]["name"], "resourceVersion": f["metadata"]["resourceVersion"]}
        assert s["spec"] == {
            "experiment": "e",
            "runId": "run-1",
            "trialId": f["spec"]["trialId"],
            "try": 0,
            "configuration": {"label": f["spec"]["configuration"]["label"]},
        }
        assert s["status"] == {k: f["status"][k] for k in ("phase", "outcome", "reason", "final") if k in f["status"]}
    # One status dict per distinct result, one configuration dict per label: not one per Trial.
    assert len({id(s["status"]) for s in slim}) == len(OUTCOMES)
    assert len({id(s["spec"]["configuration"]) for s in slim}) == 3
    assert len({id(s["spec"]["runId"]) for s in slim}) == 1
    # The bookkeeping over the cache is what it is over the whole objects.
    want = experiment_status(
        ExperimentStatus(), generation=1, run_id="run-1", plan=p, book=ledger(p, full), task_digests={}
    )
    got = experiment_status(
        ExperimentStatus(), generation=1, run_id="run-1", plan=p, book=ledger(p, slim), task_digests={}
    )
    assert got.model_dump(exclude={"conditions"}) == want.model_dump(exclude={"conditions"})
    assert (got.phase, got.finished, got.progress) == ("Complete", 24, "24/24")


def test_a_trial_in_flight_keeps_its_spec_and_status_without_evidence() -> None:
    p = CompactPlan.of(_experiment(), _tasks(1))
    full = _full(p[0].trial_id, p[0].config.label, 0, finished=False)
    s = slim_trial(copy.deepcopy(full))
    assert s["spec"] == full["spec"]
    assert s["status"] == {"phase": "Running", "node": "n1"}
    assert s["metadata"]["uid"] == "uid-0" and "managedFields" not in s["metadata"]
    other = slim_trial(copy.deepcopy(full))
    assert other["status"] is not s["status"]  # in flight: its own, the loop updates it


def test_a_finished_trial_reads_like_the_dict_and_refuses_writes() -> None:
    p = CompactPlan.of(_experiment(), _tasks(1))
    full = _full(p[0].trial_id, p[0].config.label, 2)
    s = slim_trial(copy.deepcopy(full))
    assert s["spec"]["trialId"] == p[0].trial_id and s["spec"].get("try") == 0 and s["spec"].get("seed") is None
    assert s.get("status") == {"phase": "Finished", "outcome": "infra_error", "final": True, "reason": "oom_killed"}
    assert "trialId" in s["spec"] and "uid" not in s["metadata"] and dict(s["metadata"])["name"] == "r-2"
    assert {**s["spec"]}["configuration"] == {"label": p[0].config.label}
    with pytest.raises(KeyError):
        s["metadata"]["uid"]
    with pytest.raises(TypeError):
        s["spec"]["try"] = 1  # the cache's Trials are read, never written
    with pytest.raises(TypeError):
        json.dumps(s)  # loudly, never as "{}"
    # Held in slots, not hash tables: the three levels together cost less than one small dict each.
    levels = [s, s["metadata"], s["spec"]]
    assert not any(isinstance(x, dict) for x in levels)
    assert sum(sys.getsizeof(x) for x in levels) < 2 * sys.getsizeof({"name": "", "resourceVersion": ""})
    # One object per finished Trial: its metadata and spec are views made when read, not held beside it.
    held = [x for x in gc.get_referents(s) if not isinstance(x, type)]
    assert not any(
        isinstance(x, Mapping) and x is not s["status"] and x is not s["spec"]["configuration"] for x in held
    )
    assert s["metadata"] == {"name": "r-2", "resourceVersion": "102"}
