"""The engine's seams: launch names, typed reasons, shared parsers, the submit/observe loop, adoption."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.backends.base import CleanupReport, Handle
from orchestrator.backends.threaded import ThreadedBackend
from orchestrator.contract.outputs import parse_agent_result, parse_reward
from orchestrator.engine.classify import classify
from orchestrator.engine.execute import execute
from orchestrator.engine.launch import build_launch
from orchestrator.engine.settle import pending_tries
from orchestrator.engine.sweep import prepare, start
from orchestrator.spec.backend import BackendAbilities, BackendFacts
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.launch import Launch
from orchestrator.spec.names import dns_label, launch_name
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.spec.task import EnvironmentSpec, size_to_mb
from orchestrator.store.base import TryRecord
from orchestrator.store.sqlite import Store
from tests.taskfactory import write_task

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CAPS = BackendAbilities(enforcement="fake", oom_signal="none (a stand-in backend)")


def _ok() -> TrialFacts:
    return TrialFacts(
        enforcement="fake",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="Burstable",
        agent=StepFacts(name="agent", exit_code=0),
        verifier=StepFacts(name="verifier", exit_code=0),
        reward=1.0,
    )


@pytest.mark.parametrize(
    "trial_id", ["Word-Index:1x/3x:0", "a" * 200, "UPPER_case.dots:unbounded:12", "::", "é-ü:1x-strict:0"]
)
def test_launch_names_are_dns1123_deterministic_and_distinct(trial_id: str) -> None:
    name = launch_name("20261130T000000Z-abcdef", trial_id, 0)
    assert DNS1123.match(name) and len(name) <= 63
    assert name == launch_name("20261130T000000Z-abcdef", trial_id, 0)
    assert name != launch_name("20261130T000000Z-abcdef", trial_id, 1)
    # Ids differing only in punctuation or case still get different names.
    assert dns_label("a:b") != dns_label("a/b") and dns_label("A") != dns_label("a")


def test_unknown_reason_from_a_backend_is_other_not_a_crash() -> None:
    facts = TrialFacts.model_validate({**_ok().model_dump(), "infra_hint": "kernel-panicked-on-tuesday"})
    assert facts.infra_hint is InfraReason.OTHER and facts.infra_detail == "kernel-panicked-on-tuesday"
    assert (classify(facts).outcome, classify(facts).reason) == (Outcome.INFRA_ERROR, InfraReason.OTHER)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("reward.txt", "1\n", 1.0),
        ("reward.txt", "nan", None),
        ("reward.txt", "inf", None),
        ("reward.txt", "-inf", None),
        ("reward.json", '{"reward": 0.5}', 0.5),
        ("reward.json", "NaN", None),
        ("reward.json", '{"reward": Infinity}', None),
        ("reward.json", '{"reward": true}', None),
        ("reward.txt", "yes", None),
    ],
)
def test_rewards_are_finite_numbers_or_malformed(name: str, text: str, expected: float | None) -> None:
    value, error = parse_reward(name, text)
    assert value == expected
    assert (error is None) == (expected is not None)
    if expected is None:
        assert error and error.startswith("malformed")


def test_nan_reward_cannot_reach_the_classifier_as_a_pass() -> None:
    with pytest.raises(ValueError):
        TrialFacts.model_validate({**_ok().model_dump(), "reward": math.inf})
    with pytest.raises(ValueError):
        Experiment(tasks_dir=".", reward_threshold=math.nan)


def test_verifier_killed_by_a_signal_is_a_crash_not_a_missing_reward() -> None:
    f = _ok().model_copy(update={"reward": None, "verifier": StepFacts(name="verifier", signal=9)})
    assert str(classify(f)) == "harness_error(verifier_crashed)"


def test_agent_result_keeps_only_finite_known_numbers() -> None:
    got = parse_agent_result('{"tokens_in": 10, "cost_usd": NaN, "tokens_out": -1, "model": "m", "x": 1}')
    assert {k: v for k, v in got.items() if k != "rejected"} == {"tokens_in": 10, "model": "m"}
    assert set(got["rejected"]) == {"cost_usd", "tokens_out"}  # not counted, and the evidence says why
    # the canary spin's account is kept under the same rule
    spin = parse_agent_result('{"spin_wall_s": 0.3, "spin_cpu_s": -1, "x": 2}')
    assert spin["spin_wall_s"] == 0.3 and "spin_cpu_s" not in spin and set(spin["rejected"]) == {"spin_cpu_s"}


@pytest.mark.parametrize(
    ("text", "mb"), [("2G", 2048), ("512M", 512), ("1.5Gi", 1536), ("1GB", 954), ("4096", 4096), (300, 300)]
)
def test_harbor_sizes(text: Any, mb: int) -> None:
    assert size_to_mb(text) == mb


def test_harbor_spellings_load_and_conflicts_are_refused() -> None:
    env = EnvironmentSpec.model_validate(
        {"cpus": 2, "memory": "2G", "storage": "10G", "gpus": 0, "allow_internet": False, "env": {"A": "1"}}
    )
    assert (env.memory_mb, env.storage_mb, env.allow_internet, env.env) == (2048, 10240, False, {"A": "1"})
    with pytest.raises(ValueError, match="either memory or memory_mb"):
        EnvironmentSpec.model_validate({"cpus": 1, "memory": "1G", "memory_mb": 10})
    with pytest.raises(ValueError):
        EnvironmentSpec.model_validate({"cpus": 1, "memory": "lots"})
    with pytest.raises(ValueError):  # would overflow the store's INTEGER once scaled
        EnvironmentSpec.model_validate({"cpus": 1, "memory_mb": 10**18})


def test_launch_carries_the_contract_and_task_env_but_no_secret_values(tasks_root: Path, monkeypatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-verysecretvalue-1234567890")
    write_task(
        tasks_root,
        "t",
        solve="true\n",
        extra_toml='[environment.env]\nE = "1"\n[verifier.env]\nV = "2"\n[solution.env]\nS = "3"\n',
    )
    exp = Experiment(
        tasks_dir=str(tasks_root),
        configurations=["1x/3x"],
        attempts=1,
        agent={"kind": "command", "command": "run-agent", "env_passthrough": ["MY_API_KEY"]},
    )
    task = prepare(exp)[0]
    from orchestrator.engine.plan import plan

    trial = plan(exp, [task])[0]
    launch = build_launch("run1", trial, 0, task, exp)
    assert launch.agent.shell == "run-agent" and launch.agent.secret_env == ["MY_API_KEY"]
    assert launch.agent.env["E"] == "1" and "S" not in launch.agent.env  # solution env is the oracle's only
    assert launch.verifier.env["V"] == "2" and "V" not in launch.agent.env and launch.verifier.secret_env == []
    assert launch.agent.env["HEADROOM_CONFIG"] == "1x/3x" and launch.verifier.script == "tests/test.sh"
    assert launch.amounts.limit_memory_bytes == 3 * launch.amounts.request_memory_bytes
    assert launch.allow_internet is False  # experiments give no network unless asked
    assert "sk-verysecretvalue" not in launch.model_dump_json()


def test_pending_tries_skip_finished_and_in_flight_trials() -> None:
    from orchestrator.spec.resources import ResourceConfig
    from orchestrator.spec.trial import Trial

    ts = [Trial(trial_id=f"t{i}", task_id="x", config=ResourceConfig(), attempt=i, seed=0, order=i) for i in range(4)]
    tries = {
        "t0": [TryRecord("t0", 0, "finished", True)],
        "t1": [TryRecord("t1", 0, "finished", False), TryRecord("t1", 1, "abandoned", False)],
        "t2": [TryRecord("t2", 0, "running", False)],
    }
    p = pending_tries(ts, tries, in_flight=["t2"])
    assert p.done == 1 and [(t.trial_id, n) for t, n in p.queue] == [("t1", 2), ("t3", 0)]


class SlowBackend(ThreadedBackend):
    """A stand-in whose tries end when the test says so; 'alive' tries can be adopted (like pods)."""

    name = "fake"
    abilities = CAPS

    def __init__(self, alive: set[str] | None = None, fail_submit: bool = False) -> None:
        super().__init__()
        self.release = threading.Event()
        self.alive = alive or set()
        self.submitted: list[str] = []
        self.fail_submit = fail_submit

    def run(self, launch: Launch) -> TrialFacts:
        self.release.wait(30)
        return _ok()

    def submit(self, launch: Launch) -> Handle:
        if self.fail_submit:
            raise RuntimeError("backend exploded")
        self.submitted.append(launch.name)
        return super().submit(launch)

    def adopt(self, launch: Launch) -> Handle | None:
        return self.submit(launch) if launch.name in self.alive else None

    def kill(self, name: str) -> None:
        self.release.set()

    def cleanup(self, run_id: str | None = None) -> CleanupReport:
        return CleanupReport()

    def facts(self) -> BackendFacts:
        return BackendFacts(name=self.name, abilities=CAPS)

    def close(self) -> None:
        self.shutdown()

    def wait(self, handles: Sequence[Handle], timeout: float) -> None:
        super().wait(handles, min(timeout, 0.05))


def test_resume_adopts_live_tries_and_abandons_dead_ones(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "a", solve="true\n")
    exp = Experiment(tasks_dir=str(tasks_root), configurations=["1", "unbounded"], attempts=1)
    store = Store(tmp_path / "s.db")
    run_id, tmap = start(exp, prepare(exp), store, SlowBackend())
    trials = store.planned(run_id)
    for t in trials:  # a crashed process left both tries running
        store.start_try(run_id, t.trial_id, 0)
    live = launch_name(run_id, trials[0].trial_id, 0)
    backend = SlowBackend(alive={live})
    backend.release.set()
    summary = execute(store, run_id, exp, tmap, backend)
    assert summary.adopted == 1 and summary.abandoned_before == 1
    tries = store.tries(run_id)
    assert [(r.try_index, r.status, r.final) for r in tries[trials[0].trial_id]] == [(0, "finished", True)]
    assert [(r.try_index, r.status, r.final) for r in tries[trials[1].trial_id]] == [
        (0, "abandoned", False),
        (1, "finished", True),
    ]
    assert backend.submitted.count(live) == 1  # adopted, never submitted a second time
    assert store.run(run_id).status == "finished"


def test_a_failing_backend_is_recorded_as_our_error_and_the_run_still_ends(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "a", solve="true\n")
    exp = Experiment(tasks_dir=str(tasks_root), configurations=["1"], attempts=2)
    store = Store(tmp_path / "s.db")
    run_id, tmap = start(exp, prepare(exp), store, SlowBackend())
    execute(store, run_id, exp, tmap, SlowBackend(fail_submit=True))
    df = store.trial_frame(run_id)
    assert set(df["outcome"]) == {"harness_error"} and set(df["reason"]) == {"orchestrator_error"}
    assert store.try_counts(run_id)["running"] == 0


def test_an_error_inside_the_loop_marks_the_run_failed_with_no_try_left_running(
    tasks_root: Path, tmp_path: Path
) -> None:
    write_task(tasks_root, "a", solve="true\n")
    exp = Experiment(tasks_dir=str(tasks_root), configurations=["1"], attempts=3)
    store = Store(tmp_path / "s.db")
    backend = SlowBackend()
    run_id, tmap = start(exp, prepare(exp), store, backend)
    backend.release.set()

    def boom(*_: Any) -> None:
        raise RuntimeError("a bug in a result hook")

    with pytest.raises(RuntimeError):
        execute(store, run_id, exp, tmap, backend, on_result=boom)
    assert store.run(run_id).status == "failed"
    assert store.try_counts(run_id)["running"] == 0
