"""The enforcement canary: limits that bite pass it; the rlimit fallback and ignored limits are caught."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import pytest

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.contract.outputs import parse_agent_result
from orchestrator.engine.canary import judge_cpu, run_canary
from orchestrator.spec.facts import StepFacts, TrialFacts
from orchestrator.spec.launch import Launch
from orchestrator.spec.resources import ResourceAmounts, ResourceConfig
from tests.cli_run import headroom
from tests.taskfactory import requires_cgroups, write_task

CONFIGS = [ResourceConfig.parse(x) for x in ("1x-strict", "1x/2x", "unbounded")]


@pytest.mark.cgroup
@requires_cgroups
def test_cgroup_limits_pass_the_canary_through_the_backend_seam() -> None:
    backend = LocalBackend("auto")
    try:
        got = run_canary(backend, CONFIGS)
    finally:
        backend.close()
    assert got.status == "enforced", got.problems
    arms = {a.config: a for a in got.arms}
    assert arms["unbounded"].status == "skipped"
    for label, limit_mib in (("1x-strict", 64), ("1x/2x", 128)):
        arm = arms[label]
        assert arm.status == "enforced" and arm.limit_memory_bytes == limit_mib * 2**20
        assert arm.above.verdict == "infra_error(oom_killed)"
        assert "oom_kill counter" in arm.above.oom_evidence  # the kernel's word, not an exit code
        assert arm.below.verdict == "passed"
    cpu = got.cpu["local"]
    assert cpu.declared is True and cpu.limited is not False
    assert cpu.cpu_share is not None and cpu.unlimited_cpu_share is not None  # measured


def test_the_rlimit_fallback_is_flagged_memory_weak_and_cpu_unlimited() -> None:
    backend = LocalBackend("rlimit")
    try:
        got = run_canary(backend, CONFIGS[:1])
    finally:
        backend.close()
    assert got.status == "flagged"
    arm = got.arms[0]
    assert arm.status == "weak"
    assert any("rlimit fallback" in p for p in arm.problems)
    assert any("CPU not limited" in p for p in arm.problems)


class IgnoresLimits(LocalBackend):
    """STAND-IN for a runtime that accepts a limit and does not enforce it (a sandboxed runtime that
    ignores cgroup limits, a misconfigured node): such a runtime cannot run on this machine, so the
    real local backend runs the try with its limits removed and reports the limits it was asked for,
    as that runtime would."""

    def run(self, launch: Launch) -> TrialFacts:
        asked = launch.amounts
        free = ResourceAmounts(
            request_cpus=asked.request_cpus,
            request_memory_bytes=asked.request_memory_bytes,
            limit_cpus=None,
            limit_memory_bytes=None,
        )
        facts = super().run(launch.model_copy(update={"amounts": free}))
        return facts.model_copy(update={"limit_cpus": asked.limit_cpus, "limit_memory_bytes": asked.limit_memory_bytes})


def test_a_limit_that_is_set_but_not_enforced_is_flagged() -> None:
    backend = IgnoresLimits("auto")
    try:
        got = run_canary(backend, CONFIGS[:1])
    finally:
        backend.close()
    assert got.status == "flagged"
    arm = got.arms[0]
    assert arm.status == "not_enforced"
    assert arm.above.verdict == "passed"
    assert any("set but not enforced" in p for p in got.problems)


def _spun(share: float | str, *, via: str = "result", wall: float | str = 1.0) -> TrialFacts:
    """A finished spin that reported its account through ``via``: the self-report, or stdout."""
    account = {"spin_wall_s": wall, "spin_cpu_s": share}
    stdout = json.dumps(account) + "\n" if via == "stdout" else ""
    result = parse_agent_result(json.dumps(account)) if via == "result" else {}
    return TrialFacts(
        enforcement="x",
        request_cpus=0.25,
        request_memory_bytes=1,
        limit_cpus=0.25,
        limit_memory_bytes=1,
        qos_class="Guaranteed",
        agent=StepFacts(name="agent", exit_code=0, stdout_tail=stdout),
        agent_result=result,
    )


@pytest.mark.parametrize("via", ["result", "stdout"])
def test_cpu_quota_judgement_compares_with_an_unlimited_spin(via: str) -> None:
    assert judge_cpu(0.25, _spun(0.95, via=via), _spun(0.97, via=via), declared=True).limited is False  # ignored
    assert judge_cpu(0.25, _spun(0.24, via=via), _spun(0.97, via=via), declared=True).limited is True
    busy = judge_cpu(0.25, _spun(0.2, via=via), _spun(0.3, via=via), declared=True)  # host too busy to tell
    assert busy.limited is None and "too busy" in busy.notes[0]
    assert judge_cpu(0.25, _spun(0.2, via=via), _spun(0.3, via=via), declared=False).limited is False


def test_the_self_report_wins_over_stdout_and_a_bad_account_is_not_measured() -> None:
    # what the pod backend harvests for every try is the self-report, not a passing try's stdout
    both = _spun(0.24).model_copy(
        update={"agent": StepFacts(name="agent", exit_code=0, stdout_tail='{"spin_wall_s": 1, "spin_cpu_s": 0.9}\n')}
    )
    assert judge_cpu(0.25, both, _spun(0.97), declared=True).cpu_share == 0.24
    # the try's own words are input: a NaN, a negative or a string is no account (and no crash)
    for bad in ("NaN", "-0.1", '"0.2"'):
        line = f'{{"spin_wall_s": 1.0, "spin_cpu_s": {bad}}}\n'
        facts = _spun(0.0, via="none").model_copy(
            update={"agent": StepFacts(name="agent", exit_code=0, stdout_tail=line)}
        )
        got = judge_cpu(0.25, facts, _spun(0.97), declared=True)
        assert got.cpu_share is None and got.limited is None, bad
        assert "reported no CPU time" in got.notes[0]
    assert judge_cpu(0.25, _spun(0.2, wall=0.0), _spun(0.97), declared=True).cpu_share is None


def test_a_flagged_run_is_not_reported_as_a_resource_sweep(tasks_root: Path, tmp_path: Path) -> None:
    write_task(tasks_root, "t", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path / "h.db"
    res = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "1",
        "--enforcement",
        "rlimit",
        "--store",
        str(store),
        "--format",
        "markdown",
    )
    assert res.returncode == 0, res.stderr
    assert "limits do NOT bite" in res.stderr
    assert "**Not a resource sweep: the limits did not bite.**" in res.stdout
    assert "this run is not a resource sweep" in res.stdout  # the calibration refuses
    assert "Publish with limit" not in res.stdout
    skipped = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1",
        "--attempts",
        "1",
        "--no-canary",
        "--store",
        str(tmp_path / "n.db"),
        "--format",
        "markdown",
    )
    assert skipped.returncode == 0, skipped.stderr
    assert "whether the limits bite was not checked" in skipped.stdout


class TwoNodes(LocalBackend):
    """STAND-IN for a cluster backend with two nodes (no cluster backend runs in this test): it names its
    nodes and records the node label each canary try carries, running every try on this host."""

    def __init__(self) -> None:
        super().__init__("auto")
        self.seen: list[str] = []
        self.order: list[str] = []

    abilities = LocalBackend.abilities.model_copy(update={"canary_targets": True})

    def canary_targets(self) -> list[str]:
        return ["node-a", "node-b"]

    def canary_skipped(self) -> list[dict[str, str]]:
        return []

    def run(self, launch: Launch) -> TrialFacts:
        self.seen.append(launch.labels.get("headroom.dev/canary-node", "none"))
        self.order.append(launch.trial_id.split(":")[2])  # canary:<config>:<which>:<target>
        return super().run(launch)


def test_the_canary_runs_on_every_node_a_backend_names() -> None:
    backend = TwoNodes()
    try:
        got = run_canary(backend, CONFIGS[:1])
    finally:
        backend.close()
    assert got.targets == ["node-a", "node-b"]
    assert sorted({a.target for a in got.arms}) == ["node-a", "node-b"] and set(got.cpu) == {
        "node-a",
        "node-b",
    }
    # above, below, the CPU probe and its unlimited reference: four tries pinned to each node
    assert sorted(backend.seen) == ["node-a"] * 4 + ["node-b"] * 4
    # the CPU pair starts only when every memory try is over (their start-up would eat the CPU it measures)
    assert sorted(backend.order[:4]) == ["above", "above", "below", "below"]
    assert sorted(backend.order[4:]) == ["cpu-probe", "cpu-probe", "cpu-reference", "cpu-reference"]


def interrupt(store: Path) -> None:
    """Mark the run interrupted: a finished run has nothing to resume, and a resume of it runs no canary."""
    import sqlite3

    with closing(sqlite3.connect(store)) as db, db:
        db.execute("UPDATE runs SET status='interrupted'")


@pytest.mark.cgroup
@requires_cgroups
def test_resume_runs_the_canary_again_and_a_resume_whose_limits_do_not_bite_flags_the_run(
    tasks_root: Path, tmp_path: Path
) -> None:
    write_task(tasks_root, "t", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path / "h.db"
    first = headroom(
        "sweep",
        str(tasks_root),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "2",
        "--store",
        str(store),
        "--format",
        "none",
    )
    assert first.returncode == 0, first.stderr
    interrupt(store)
    # the same run resumed under the rlimit fallback: the machine the rest would run on no longer enforces
    resumed = headroom("resume", "--store", str(store), "--enforcement", "rlimit", "--format", "markdown")
    assert resumed.returncode == 0, resumed.stderr
    assert "(resume) [" not in resumed.stderr and "(resume) enforcement canary: limits do NOT bite" in resumed.stderr
    from orchestrator.store.sqlite import Store

    s = Store(store)
    prov = s.provenance(s.run().run_id)
    assert prov.canary.status == "enforced"  # the start's verdict is kept as it was
    (again,) = prov.canary_resumed
    assert again.status == "flagged" and again.resumed_at and again.enforcement == "rlimit"
    assert "**Not a resource sweep: the limits did not bite.**" in resumed.stdout
    assert "Enforcement canary (at start): limits bite" in resumed.stdout
    assert f"Enforcement canary (on resume at {again.resumed_at}): **limits do not bite" in resumed.stdout
    assert f"on resume at {again.resumed_at}: 1x-strict on local: memory is capped only by the rlimit" in resumed.stdout
    # a second resume that is fine again does not wash the flag out: every canary of the run counts
    interrupt(store)
    second = headroom("resume", "--store", str(store), "--format", "markdown")
    assert second.returncode == 0, second.stderr
    prov = s.provenance(s.run().run_id)
    assert [c.status for c in prov.canary_resumed] == ["flagged", "enforced"]
    assert "**Not a resource sweep: the limits did not bite.**" in second.stdout
    calibrate = headroom("runs", "calibrate", str(store))
    assert calibrate.returncode == 2 and "is not a resource sweep" in calibrate.stderr
