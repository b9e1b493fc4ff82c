"""The typed evidence (orchestrator/spec/evidence.py): one versioned schema every backend fills, refused keys,
the stored shape kept, and rows written before the schema was typed still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.images import ImageInfo
from orchestrator.backends.kubernetes import message
from orchestrator.backends.kubernetes.signals import observe
from orchestrator.backends.local.backend import LocalBackend
from orchestrator.contract import sanitiser
from orchestrator.controller.export import facts_of
from orchestrator.controller.reconcile import bounded_evidence
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.engine.regrade import regrade
from orchestrator.engine.settle import settle
from orchestrator.engine.sweep import prepare
from orchestrator.spec.evidence import (
    SCHEMA_VERSION,
    ContainerState,
    Evidence,
    Overcommit,
    RunnerEvidence,
    SanitiserReport,
    evidence_path,
    read_stored,
)
from orchestrator.spec.experiment import Experiment, RetryPolicy
from orchestrator.spec.facts import StepFacts, TrialFacts, evidence_schema
from orchestrator.spec.provenance import Provenance
from orchestrator.store.sqlite import Store
from tests.cli_run import headroom as run_cli
from tests.evidence_check import assert_fits_schema
from tests.kubernetes.test_signals import CASES, PASS, PENDING_EVENTS, ctx, finished
from tests.taskfactory import write_task


def _settled(facts: TrialFacts) -> TrialFacts:
    return settle(facts, reward_threshold=1.0, retry=RetryPolicy(), finished_before=0, secrets=[]).facts


def _local_run(root: Path, store: Store) -> tuple[str, TrialFacts]:
    """One real trial on the local backend, settled and recorded as the engine records it."""
    write_task(root, "t", solve='touch "$HEADROOM_WORKDIR/out"\n')
    exp = Experiment(tasks_dir=str(root), configurations=["1x-strict"], attempts=1)
    tasks = prepare(exp)
    (trial,) = plan(exp, tasks)
    run_id = store.create_run(
        name="ev",
        backend="local",
        enforcement="auto",
        spec=exp.model_dump(mode="json"),
        provenance=Provenance(),
        tasks=tasks,
        trials=[trial],
    )
    backend = LocalBackend()
    try:
        raw = backend.run(build_launch(run_id, trial, 0, tasks[0], exp))
    finally:
        backend.close()
    s = settle(raw, reward_threshold=1.0, retry=RetryPolicy(), finished_before=0, secrets=[])
    store.start_try(run_id, trial.trial_id, 0)
    assert store.finish_try(run_id, trial.trial_id, 0, s.facts, s.verdict, final=True)
    return run_id, s.facts


def test_a_real_local_trial_fills_the_one_schema(tasks_root: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "h.db")
    run_id, facts = _local_run(tasks_root, store)
    ev = facts.extra
    assert facts.reward == 1.0 and ev.isolation in ("none", "namespaces")
    assert ev.sanitiser is not None and ev.sanitiser.status == "ok" and ev.verifier_only_links_removed == 0
    (row,) = store.evidence(run_id, store.planned(run_id)[0].trial_id)
    assert_fits_schema(row)
    # the stored row holds what the backend wrote and the version, nothing unset
    assert row["extra"]["schema_version"] == SCHEMA_VERSION and "pod_status" not in row["extra"]
    assert TrialFacts.from_stored(row) == facts
    store.close()


def test_pod_facts_fill_the_one_schema_for_every_signal() -> None:
    """Every pod fixture the signal tests classify (infra ends, the runner's report, its counters)."""
    # the passing report again, with the runner's CPU counters and its agent check
    thr = PASS + "agent_cpu_us=1500000\nagent_cpu_thr=20,5,300000\nagent_check=ok\nworkdir=/app\n"
    seen = []
    for _, pod, _ in CASES:
        obs = observe(pod, PENDING_EVENTS, ctx())
        assert obs.facts is not None
        seen.append(obs.facts)
    for msg in (PASS, thr):
        obs = observe(finished(msg), PENDING_EVENTS, ctx(log_tail="the container's last words"))
        assert obs.facts is not None
        seen.append(obs.facts)
    for facts in seen:
        assert_fits_schema(facts)
        assert_fits_schema(_settled(facts))
    last = seen[-1].extra
    assert last.cpu_throttling is not None and last.cpu_throttling.nr_throttled == 5
    assert last.agent_check is not None and last.agent_check.status == "ok" and last.pod_status is not None
    assert last.runner is not None and last.log_tail == "the container's last words"


def test_docker_facts_fill_the_one_schema() -> None:
    """What the Docker backend writes, through its own helpers, on the bodies its unit tests use: a container's
    cgroup counters over two runs, or the stats endpoint's, the image it resolved, the engine's State."""
    parts = {
        "cgroup": [
            {
                "peak": 300,
                "cpu": 1.5,
                "memory_events": {"oom_kill": 0, "under_oom": 1, "failcnt": 4},
                "cpu_throttling": {"nr_periods": 10, "nr_throttled": 2, "throttled_usec": 7},
            },
            {
                "peak": 100,
                "cpu": 0.25,
                "memory_events": {"oom_kill": 1, "max": 3},
                "cpu_throttling": {"nr_periods": 5, "nr_throttled": 0, "nr_bursts": 0},
            },
        ],
        "stats": [
            {
                "peak": None,
                "cpu": 0.5,
                "usage_source": "docker stats endpoint",
                "cpu_throttling": {"periods": 8, "throttled_periods": 1, "throttled_time": 500_000_000},
            }
        ],
    }
    for how, used in parts.items():
        facts = TrialFacts(
            enforcement="cgroup-v2",
            request_cpus=1,
            request_memory_bytes=1 << 26,
            limit_cpus=1,
            limit_memory_bytes=1 << 26,
            qos_class="Guaranteed",
            agent=StepFacts(name="agent"),
        )
        facts.extra.image = ImageInfo(
            "r/t:1", "sha256:" + "a" * 64, ("r/t@sha256:" + "b" * 64,), built=True
        ).provenance()
        facts.extra.cgroup = "cgroup-v2" if how == "cgroup" else None
        DockerBackend._usage(used, facts)
        facts.extra.container_state = ContainerState(OOMKilled=True, ExitCode=137, Error="")
        DockerBackend._runtime_oom({"OOMKilled": True}, [facts.agent] if facts.agent else [])
        assert_fits_schema(facts)
        assert_fits_schema(_settled(facts))
        assert facts.extra.cpu_throttling is not None
        assert facts.extra.cpu_throttling.read() == ((15.0, 2.0, 7e-06) if how == "cgroup" else (8.0, 1.0, 0.5))
    assert facts.extra.usage_source == "docker stats endpoint"


def test_a_writer_cannot_invent_a_key_or_a_type() -> None:
    with pytest.raises(ValidationError):
        Evidence.model_validate({"link_scan": {}})  # a key no version writes any more
    ev = Evidence()
    with pytest.raises(ValidationError):
        ev.verifier_only_links_removed = "many"  # type: ignore[assignment]
    with pytest.raises(ValidationError):
        ev.sanitiser = {"status": "ok", "links_removd": 1}  # type: ignore[assignment]
    with pytest.raises(ValidationError):
        TrialFacts.model_validate({**_facts_row(), "extra": {"queue": {"name": "q", "gated_for": 3}}})


def test_every_key_the_sanitiser_and_the_runner_report_has_a_typed_field() -> None:
    assert set(sanitiser._COUNTS) <= set(SanitiserReport.model_fields)
    report = sanitiser.parse("status=ok\n" + "".join(f"{k}=1\n" for k in sanitiser._COUNTS), 0, False)
    assert report.evidence(0.5).model_dump() == {
        "status": "ok",
        **dict.fromkeys(sanitiser._COUNTS, 1),
        "duration_s": 0.5,
    }
    kept = RunnerEvidence.keys()
    parsed = message.parse("v=1\n" + "".join(f"{k}=x\n" for k in kept) + "reward=1\n")
    assert parsed is not None and set(parsed.evidence().model_dump()) == set(kept)


def test_only_what_a_writer_set_is_written_and_it_reads_back_the_same() -> None:
    ev = Evidence(node=None, overcommit=Overcommit(scope="host", placement="default", ratio_max=0.5))
    ev.storage_peak_bytes = 10
    dumped = ev.model_dump(mode="json")
    assert dumped == {
        "node": None,
        "storage_peak_bytes": 10,
        "schema_version": SCHEMA_VERSION,
        "overcommit": {"scope": "host", "placement": "default", "ratio_max": 0.5},
    }
    assert read_stored(dumped) == ev and Evidence.model_validate(dumped) == ev


def _facts_row() -> dict[str, Any]:
    return TrialFacts(
        enforcement="cgroup-v2",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="BestEffort",
    ).model_dump(mode="json")


def test_an_old_shape_evidence_row_still_reads(tasks_root: Path, tmp_path: Path) -> None:
    """A row as headroom wrote it before the evidence was typed (no version, keys since retired) reads through every
    reader of stored evidence: the typed facts, a re-grade, the CPU frame, a bundle's import."""
    store = Store(tmp_path / "h.db")
    run_id, facts = _local_run(tasks_root, store)
    trial_id = store.planned(run_id)[0].trial_id
    old = json.loads(facts.model_dump_json())
    old["extra"] = {k: v for k, v in old["extra"].items() if k != "schema_version"} | {
        "link_scan": {"links": ["/app/a"], "removed": 1},  # replaced by the sanitiser
        "runner": {"workdir": "/app", "sweep_left": "0"},  # a runner key since split in two
        "overcommit": {
            "scope": "host",
            "placement": "default",
            "capacity_bytes": 1000,
            "concurrent_limit_bytes_max": 1500,
            "ratio_max": 1.5,
            "concurrent_tries_max": 2,
            "unbounded_in_flight": True,
        },
        "cpu_throttling": {"nr_periods": 10, "nr_throttled": 4, "throttled_usec": 2_000_000},
    }
    store.db.execute(
        "UPDATE evidence SET json = ? WHERE run_id = ? AND trial_id = ?", (json.dumps(old), run_id, trial_id)
    )
    store.db.commit()
    (row,) = store.evidence(run_id, trial_id)

    read = TrialFacts.from_stored(row)
    assert read.extra.schema_version == SCHEMA_VERSION and read.extra.runner == RunnerEvidence(workdir="/app")
    assert read.extra.legacy == {"link_scan": {"links": ["/app/a"], "removed": 1}, "runner.sweep_left": "0"}
    assert read.extra.overcommit is not None and read.extra.overcommit.ratio_max == 1.5
    assert read.extra.sanitiser == facts.extra.sanitiser
    with pytest.raises(ValidationError):  # only a stored row's reader sets keys aside; a writer never can
        TrialFacts.model_validate(row)

    again = regrade(store, run_id, None, {}, "graders.toml")  # re-classifies every stored row
    assert again.flips == [] and sum(again.unchanged_outcomes.values()) == 1
    (copied,) = store.evidence(again.run_id, trial_id)
    assert copied["extra"]["legacy"]["link_scan"]["removed"] == 1  # re-stored, nothing lost
    assert_fits_schema(copied)

    cpu = store.cpu_frame(run_id)
    assert (cpu.loc[0, "nr_periods"], cpu.loc[0, "nr_throttled"], cpu.loc[0, "throttled_s"]) == (10, 4, 2.0)

    bundled = Store(tmp_path / "b.db")
    imported = bundled.import_run(*store.export_run(run_id))
    cols = bundled.db.execute(
        "SELECT overcommit_ratio, overcommit_beside_unbounded FROM executions WHERE run_id = ?", (imported,)
    ).fetchone()
    assert tuple(cols) == (1.5, 1)
    bundled.close()
    store.close()


def test_newer_evidence_is_refused_with_its_version() -> None:
    with pytest.raises(ValidationError, match="evidence schema version 2 is newer than this headroom reads"):
        TrialFacts.from_stored({**_facts_row(), "extra": {"schema_version": 2}})


def test_the_schema_and_the_sql_paths_come_from_the_models() -> None:
    schema = evidence_schema()
    assert schema["$id"] == f"headroom.evidence/{SCHEMA_VERSION}"
    ev = schema["$defs"]["Evidence"]
    assert ev["additionalProperties"] is False and ev["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert evidence_path("overcommit", "ratio_max") == "$.extra.overcommit.ratio_max"
    for bad in (("overcommit", "ratio"), ("link_scan",), ("log_tail", "x")):
        with pytest.raises(KeyError):
            evidence_path(*bad)


def test_a_trial_resources_evidence_exports_typed_whole_or_cut() -> None:
    """The controller keeps a try's facts in the Trial's status (cut to a byte limit when large); the export reads
    them back typed, whole, or as the cut copy with what the status fields still say."""
    facts = TrialFacts.model_validate({**_facts_row(), "reward": 1.0, "extra": {"node": "n1", "log_tail": "x" * 5000}})
    whole, cut = bounded_evidence(facts)
    assert not cut and facts_of({"metadata": {"name": "t"}, "status": {"evidence": whole}}) == facts
    big, cut = bounded_evidence(facts, limit=2048)
    assert cut and big["extra"]["log_tail"] == "[dropped: evidence limit]"
    status = {"evidence": big, "evidenceTruncated": True, "reward": 1.0, "enforcement": "cgroup-v2"}
    exported = facts_of({"metadata": {"name": "t"}, "status": status})
    assert exported.reward == 1.0 and exported.extra.evidence_truncated is True and exported.extra.trial == "t"
    assert exported.extra.evidence is not None and exported.extra.evidence["extra"]["node"] == "n1"
    assert_fits_schema(exported)


def test_the_cli_prints_the_one_evidence_schema_a_stored_row_is_checked_against(tmp_path: Path) -> None:
    res = run_cli("schema", "evidence", timeout=120)
    assert res.returncode == 0, res.stderr
    printed = json.loads(res.stdout)
    assert printed == evidence_schema() and printed["$id"].startswith("headroom.evidence/")
