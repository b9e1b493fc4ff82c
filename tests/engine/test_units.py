"""Pure rules: labels, classification, planning, retries, cgroup v2 knobs."""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.backends.threaded import ThreadedBackend
from orchestrator.engine.classify import classify
from orchestrator.engine.execute import execute
from orchestrator.engine.plan import plan
from orchestrator.engine.sweep import prepare, start
from orchestrator.errors import LabelError
from orchestrator.isolation import cgroups
from orchestrator.spec.backend import BackendAbilities, BackendFacts
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.resources import ResourceConfig, scale
from orchestrator.store.sqlite import Store
from tests.taskfactory import write_task


@pytest.mark.parametrize(
    ("label", "req", "lim", "canonical"),
    [
        ("1x-strict", 1, 1, "1x-strict"),
        ("1", 1, 1, "1x-strict"),
        ("3", 1, 3, "1x/3x"),
        ("1x/3x", 1, 3, "1x/3x"),
        ("1.5", 1, 1.5, "1x/1.5x"),
        ("2x/4x", 2, 4, "2x/4x"),
        ("unbounded", 1, None, "unbounded"),
        ("2x/unbounded", 2, None, "2x/unbounded"),
        ("2-strict", 2, 2, "2x-strict"),
    ],
)
def test_labels_round_trip(label: str, req: float, lim: float | None, canonical: str) -> None:
    c = ResourceConfig.parse(label)
    assert (c.request_multiplier, c.limit_multiplier, c.label) == (req, lim, canonical)
    assert ResourceConfig.parse(c.label) == c


def test_bad_labels() -> None:
    with pytest.raises(LabelError):
        ResourceConfig.parse("lots")
    with pytest.raises(ValidationError, match="below request"):
        ResourceConfig.parse("3x/2x")


def test_scale_and_qos() -> None:
    strict = scale(2, 100, ResourceConfig.parse("1x-strict"))
    assert strict.qos_class == "Guaranteed" and strict.limit_memory_bytes == 100 * 2**20
    burst = scale(2, 100, ResourceConfig.parse("1x/3x"))
    assert burst.qos_class == "Burstable" and burst.limit_cpus == 6 and burst.request_cpus == 2
    assert scale(1, 10, ResourceConfig.parse("unbounded")).limit_memory_bytes is None


def _facts(**kw) -> TrialFacts:
    base = dict(
        enforcement="cgroup-v1",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=1,
        limit_memory_bytes=1,
        qos_class="Guaranteed",
    )
    return TrialFacts(**{**base, **kw})


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            dict(
                agent=StepFacts(name="agent", exit_code=0), verifier=StepFacts(name="verifier", exit_code=0), reward=1.0
            ),
            "passed",
        ),
        (
            dict(
                agent=StepFacts(name="agent", exit_code=3), verifier=StepFacts(name="verifier", exit_code=0), reward=1.0
            ),
            "passed",
        ),
        (
            dict(
                agent=StepFacts(name="agent", exit_code=0), verifier=StepFacts(name="verifier", exit_code=1), reward=0.0
            ),
            "failed",
        ),
        (dict(agent=StepFacts(name="agent", signal=9, oom_kills=1)), "infra_error(oom_killed)"),
        (
            dict(
                agent=StepFacts(name="agent", exit_code=0), verifier=StepFacts(name="verifier", signal=9, oom_kills=1)
            ),
            "infra_error(oom_killed)",
        ),
        (dict(agent=StepFacts(name="agent", signal=9, timed_out=True)), "timeout"),
        (
            dict(agent=StepFacts(name="agent", exit_code=0), verifier=StepFacts(name="verifier", timed_out=True)),
            "harness_error(verifier_timeout)",
        ),
        (
            dict(agent=StepFacts(name="agent", exit_code=0), verifier=StepFacts(name="verifier", exit_code=2)),
            "harness_error(verifier_crashed)",
        ),
        (
            dict(agent=StepFacts(name="agent", exit_code=0), verifier=StepFacts(name="verifier", exit_code=0)),
            "harness_error(reward_missing)",
        ),
        (
            dict(
                agent=StepFacts(name="agent", exit_code=0),
                verifier=StepFacts(name="verifier", exit_code=0),
                reward_error="malformed: x",
            ),
            "harness_error(reward_malformed)",
        ),
        (dict(setup_error="cannot create cgroup"), "infra_error(spawn_failed)"),
        (dict(infra_hint="evicted"), "infra_error(evicted)"),
    ],
)
def test_classification(facts: dict, expected: str) -> None:
    assert str(classify(_facts(**facts))) == expected


def _exp(root: Path, **kw) -> Experiment:
    return Experiment(tasks_dir=str(root), **kw)


def test_plan_is_stable_block_randomized_and_pairs_seeds(tasks_root: Path) -> None:
    for n in "abcd":
        write_task(tasks_root, n, solve="true\n")
    exp = _exp(tasks_root, attempts=3, seed=7)
    tasks = prepare(exp)
    p1, p2 = plan(exp, tasks), plan(exp, tasks)
    assert p1 == p2  # same seed, same order, same ids
    assert len({t.trial_id for t in p1}) == 4 * 5 * 3
    k = len(exp.configurations)
    for i in range(0, len(p1), k):  # every block holds each configuration once
        assert Counter(t.config.label for t in p1[i : i + k]) == Counter(c.label for c in exp.configurations)
    assert [t.trial_id for t in plan(_exp(tasks_root, attempts=3, seed=8), tasks)] != [t.trial_id for t in p1]
    # Common random numbers: same task and attempt -> same seed under every configuration.
    by = {}
    for t in p1:
        by.setdefault((t.task_id, t.attempt), set()).add(t.seed)
    assert all(len(s) == 1 for s in by.values())
    assert len({next(iter(s)) for s in by.values()}) == len(by)


class ScriptedBackend(ThreadedBackend):
    """Stands in for infra failures that cannot happen on a local machine (evictions): the test says so."""

    name = "scripted"
    abilities = BackendAbilities(enforcement="scripted")

    def __init__(self, evict_first_n: int) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self.evict_first_n = evict_first_n
        self.lock = threading.Lock()

    def facts(self) -> BackendFacts:
        return BackendFacts(name=self.name, abilities=self.abilities)

    def close(self) -> None:
        self.shutdown()

    def kill(self, name: str) -> None:
        pass

    def run(self, launch) -> TrialFacts:
        with self.lock:
            self.calls[launch.trial_id] += 1
            n = self.calls[launch.trial_id]
        if n <= self.evict_first_n:
            return _facts(infra_hint="preempted", agent_result={"cost_usd": 0.25})
        return _facts(
            agent=StepFacts(name="agent", exit_code=0),
            verifier=StepFacts(name="verifier", exit_code=0),
            reward=1.0,
            agent_result={"cost_usd": 0.5},
        )


def test_retries_are_bounded_and_every_try_stays_on_record(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "a", solve="true\n")
    exp = _exp(tasks_root, attempts=2, configurations=["1", "unbounded"], retry={"max_retries": 2})
    tasks = prepare(exp)
    store = Store(tmp_path / "s.db")
    # Preempted twice then fine: two retries suffice.
    run_id, tmap = start(exp, tasks, store, ScriptedBackend(2))
    execute(store, run_id, exp, tmap, ScriptedBackend(2))
    df = store.trial_frame(run_id)
    assert len(df) == 4 and set(df["outcome"]) == {"passed"}
    assert df["cost_usd"].tolist() == [1.0] * 4  # 0.5 for the result + 2 x 0.25 spent on the evicted tries
    assert store.try_counts(run_id) == {"all_tries": 12, "final": 4, "retried": 8, "abandoned": 0, "running": 0}
    retried = store.db.execute("SELECT DISTINCT outcome, reason FROM executions WHERE run_id=? AND final=0", (run_id,))
    assert [tuple(r) for r in retried] == [("infra_error", "preempted")]  # the original tries stay on record
    # Preempted three times: retries run out, the infra error is the result.
    run2, tmap = start(exp, tasks, store, ScriptedBackend(3))
    backend = ScriptedBackend(3)
    execute(store, run2, exp, tmap, backend)
    df2 = store.trial_frame(run2)
    assert set(df2["outcome"]) == {"infra_error"} and set(df2["reason"]) == {"preempted"}
    assert max(backend.calls.values()) == 3
    # OOM kills are the measurement, and nothing a trial can bring about itself is retried by default:
    # an agent could otherwise blow its disk limit to re-roll a try it is failing
    assert {"oom_killed", "storage_limit"}.isdisjoint(exp.retry.reasons)
    assert {"preempted", "api_error", "image_pull", "node_lost", "evicted"} <= set(exp.retry.reasons)


def test_store_is_wal(tmp_path: Path) -> None:
    Store(tmp_path / "s.db").close()
    assert sqlite3.connect(tmp_path / "s.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cgroup_v2_knobs(tmp_path: Path) -> None:
    """This machine's cgroup v2 hierarchy carries no memory controller, so the v2 driver writes into a
    directory laid out like cgroupfs; the kernel side of v2 is not exercised here (v1 tests cover real enforcement)."""
    root = tmp_path / "cg"
    own = root / "job"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("")
    mounts = cgroups.Mounts(v2_root=root, v2_own="/job")
    drv = cgroups.CgroupV2Driver(mounts, "headroom-1")
    cg = drv.create("t", scale(0.5, 100, ResourceConfig.parse("1x/2x")))
    d = own / "headroom-1" / "t"
    assert (d / "memory.max").read_text() == str(200 * 2**20)
    assert (d / "memory.min").read_text() == str(100 * 2**20)
    assert (d / "cpu.max").read_text() == "100000 100000"
    assert (d / "cpu.weight").read_text() == str(cgroups.cpu_weight(0.5))
    assert cg.procs_files() == [d / "cgroup.procs"]
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cg.oom_kills() == 1
    unb = drv.create("u", scale(1, 100, ResourceConfig.parse("unbounded")))
    assert (
        not (own / "headroom-1" / "u" / "memory.max").exists() and not (own / "headroom-1" / "u" / "cpu.max").exists()
    )
    assert unb.oom_kills() == 0


def test_kubelet_cpu_conversions() -> None:
    assert cgroups.cpu_shares(1) == 1024 and cgroups.cpu_shares(0.001) == 2
    assert cgroups.cpu_weight(1) == 39  # kubelet: 1 + ((1024 - 2) * 9999) // 262142
