"""The enforcement canary: before a sweep, prove on this backend that each configuration's limits bite.

A resource sweep means something only if the limits it varies are enforced. For
each configuration (arm), on each target (the local host, or every node a
cluster run uses), two tries of a tiny bundled task (``orchestrator/canary_task``)
go through the backend's own ``submit``/``observe``, exactly like a trial:

* **above**: allocates a little more than the arm's memory limit. It must end
  as ``infra_error(oom_killed)``, with the OOM seen by the kernel or runtime
  (not inferred from an allocation failure the workload printed).
* **below**: allocates a little less. It must pass.

Once per target, after those, a **cpu-probe** try spins one CPU for a moment
under the canary's quota, beside a **cpu-reference** try spinning without one.
Each reports its CPU time against wall time in the agent's self-report
(``$HEADROOM_AGENT_RESULT``, which every backend brings back for every try): the
pair shows whether the CPU quota bites.

The canary's memory limit for an arm is the arm applied to the canary's own
spec (64 MiB); its CPU limit is the canary's fixed 0.25 cpu whatever the arm
(the mechanism is what is checked, and one spinning thread can only show a
quota well below one core). A task-band arm is checked at the canary's 1x.
An unbounded arm has no limit to check and is skipped.

Verdicts: ``enforced``; ``not_enforced`` (the above-limit hog was not killed:
the limit is set but ignored); ``weak`` (memory capped only by the rlimit
fallback, or CPU not limited); ``inconclusive`` (the below-limit try did not
pass, so the canary itself could not run). Anything but ``enforced`` flags the
run: the report does not present it as a resource sweep.

Targets: a backend that schedules onto nodes exposes ``canary_targets()`` (node
names) and may expose ``canary_skipped()`` (``[{target, reason}]``: candidate
nodes it left out, kept in the record); the canary labels each try
``headroom.dev/canary-node`` and the backend pins it there (the Pod backend: a
required node affinity, see ``backends/kubernetes/nodes.py``). A backend without
it is one target. A backend that names no target gets the record ``not run``.
The canary's task names no image: ``image`` gives it one (a cluster run passes
the experiment's image, else the first task's).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.backends.abilities import canary_targets
from orchestrator.backends.base import Backend, Handle, recorded
from orchestrator.contract.outputs import CANARY_KEYS, non_negative_number, parse_agent_result
from orchestrator.engine.canary_verdict import describe as describe
from orchestrator.engine.canary_verdict import flags_run as flags_run
from orchestrator.engine.canary_verdict import not_run as not_run
from orchestrator.engine.canary_verdict import of_run as of_run
from orchestrator.engine.canary_verdict import run_problems as run_problems
from orchestrator.engine.classify import classify
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch, StepLaunch, TaskSource
from orchestrator.spec.names import CANARY_NODE_LABEL as NODE_LABEL
from orchestrator.spec.names import label_value, launch_name
from orchestrator.spec.outcome import InfraReason, Outcome
from orchestrator.spec.provenance import CanaryArm, CanaryTry, CanaryVerdict, CpuCheck, SkippedTarget
from orchestrator.spec.resources import MIB, ResourceAmounts, ResourceConfig
from orchestrator.tasks.loader import load_task

CANARY_TASK = Path(__file__).resolve().parent.parent / "canary_task"
#: How far above / below the limit the hog goes (MiB, or this share of the limit if larger).
ABOVE_MIB, ABOVE_SHARE = 16, 0.25
BELOW_MIB, BELOW_SHARE = 24, 0.40
SPIN_S = 0.3
#: A spin that got more than quota x this of a CPU was not held to its quota. Contention can
#: only lower the share, so a busy host can hide a missing quota but never invent one.
CPU_SLACK = 1.6
DEADLINE_S = 120.0


def _amounts(config: ResourceConfig, cpus: float, memory_mb: int) -> ResourceAmounts | None:
    if config.unbounded:
        return None
    lim = 1.0 if config.task_band else float(config.limit_multiplier or 1.0)
    req = 1.0 if config.task_band else config.request_multiplier
    return ResourceAmounts(
        request_cpus=cpus,
        request_memory_bytes=int(memory_mb * MIB * req),
        limit_cpus=cpus,
        limit_memory_bytes=int(memory_mb * MIB * lim),
    )


def hog_sizes(limit_bytes: int) -> tuple[int, int]:
    """(above, below) in MiB for a limit."""
    limit_mb = limit_bytes / MIB
    above = limit_mb + max(ABOVE_MIB, ABOVE_SHARE * limit_mb)
    below = limit_mb - max(BELOW_MIB, BELOW_SHARE * limit_mb)
    return int(above + 0.999), max(1, int(below))


def _launch(
    run_id: str,
    config: ResourceConfig,
    which: str,
    target: str,
    mb: int,
    spin_s: float,
    amounts: ResourceAmounts,
    image: str | None = None,
) -> Launch:
    task = load_task(CANARY_TASK)
    trial_id = f"canary:{config.label}:{which}:{target}"
    env = {
        "HEADROOM_CANARY_MB": str(mb),
        "HEADROOM_CANARY_SPIN_S": str(spin_s),
        "HEADROOM_TASK_ID": task.id,
        "HEADROOM_TRIAL_ID": trial_id,
        "HEADROOM_CONFIG": config.label,
        "HEADROOM_SEED": "0",
        "HEADROOM_ATTEMPT": "0",
        "HEADROOM_TRY": "0",
        "HEADROOM_INSTRUCTION": task.instruction,
    }
    labels = {
        "headroom.dev/run": label_value(run_id),
        "headroom.dev/task": "canary",
        "headroom.dev/config": label_value(config.label),
        "headroom.dev/attempt": "0",
        "headroom.dev/try": "0",
    }
    if target != "local":
        labels[NODE_LABEL] = label_value(target)
    return Launch(
        run_id=run_id,
        trial_id=trial_id,
        try_index=0,
        name=launch_name(run_id, trial_id, 0),
        task_id=task.id,
        config_label=config.label,
        attempt=0,
        seed=0,
        agent_kind="oracle",
        task=TaskSource(task_id=task.id, path=task.path, digest=task.digest, docker_image=image, include_solution=True),
        agent=StepLaunch(name="agent", script="solution/solve.sh", env=env, timeout_s=task.spec.agent.timeout_sec),
        verifier=StepLaunch(name="verifier", script="tests/test.sh", env=env, timeout_s=task.spec.verifier.timeout_sec),
        amounts=amounts,
        request_storage_bytes=task.spec.environment.storage_mb * MIB,
        limit_storage_bytes=None,
        allow_internet=False,
        labels=labels,
        spec_digest="headroom-canary",
    )


def _summary(facts: TrialFacts | BaseException | None) -> CanaryTry:
    if facts is None:
        return CanaryTry(verdict="no result before the deadline")
    if isinstance(facts, BaseException):
        return CanaryTry(verdict="backend error", error=f"{type(facts).__name__}: {facts}")
    a = facts.agent
    return CanaryTry(
        verdict=str(classify(facts)),
        enforcement=facts.enforcement,
        limit_memory_bytes=facts.limit_memory_bytes,
        peak_memory_bytes=facts.peak_memory_bytes,
        cpu_time_s=facts.cpu_time_s,
        duration_s=facts.duration_s,
        agent_duration_s=a.duration_s if a else None,
        oom_evidence=a.oom_evidence if a else None,
        exit_code=a.exit_code if a else None,
        signal=a.signal if a else None,
    )


def _spin(facts: TrialFacts) -> dict[str, float]:
    """The spin's own account of wall and CPU time.

    First from the agent's self-report (``$HEADROOM_AGENT_RESULT``), which every backend brings
    back for every try (the Pod backend in its termination message); else from the first JSON
    line the spin printed, for a backend that keeps a passing try's stdout. Either way only
    finite, non-negative numbers count (``parse_agent_result``): the try's own words are input.
    """
    lines = (facts.agent.stdout_tail if facts.agent else "").splitlines()
    for got in (facts.agent_result, *(parse_agent_result(line) for line in lines)):
        if all(non_negative_number(got.get(k)) for k in CANARY_KEYS):
            return {k: float(got[k]) for k in CANARY_KEYS}
    return {}


def judge(
    config: str,
    target: str,
    amounts: ResourceAmounts,
    above: TrialFacts | BaseException | None,
    below: TrialFacts | BaseException | None,
) -> CanaryArm:
    """The memory verdict for one arm from its two tries (pure: testable without running anything)."""
    check = CanaryArm(
        config=config,
        target=target,
        status="enforced",
        limit_memory_bytes=amounts.limit_memory_bytes,
        limit_cpus=amounts.limit_cpus,
        above=_summary(above),
        below=_summary(below),
        problems=[],
        notes=[],
    )
    if not (isinstance(below, TrialFacts) and classify(below).outcome is Outcome.PASSED):
        check.status = "inconclusive"
        check.problems.append(f"the below-limit try did not pass ({check.below.verdict}): the canary could not run")
        return check
    if not isinstance(above, TrialFacts):
        check.status = "inconclusive"
        check.problems.append(f"the above-limit try gave no result ({check.above.verdict})")
        return check
    verdict = classify(above)
    killed = verdict.outcome is Outcome.INFRA_ERROR and verdict.reason is InfraReason.OOM_KILLED
    evidence = (above.agent.oom_evidence if above.agent else None) or ""
    # Under rlimits no kernel gives an OOM verdict (and none is taken from the hog's own words):
    # a hog that did not pass hit the cap, which is the most the fallback can show.
    rlimit = above.enforcement == "rlimit" or "rlimit" in evidence
    if rlimit and verdict.outcome is not Outcome.PASSED:
        killed = True
    if not killed:
        check.status = "not_enforced"
        check.problems.append(
            f"a hog above the {(amounts.limit_memory_bytes or 0) // MIB} MiB limit was not OOM-killed "
            f"({verdict}): the memory limit is set but not enforced"
        )
    elif rlimit:
        check.status = "weak"
        check.problems.append(
            "memory is capped only by the rlimit fallback: no kernel OOM kill, allocation failures "
            "instead, and page cache is not counted"
        )
    return check


def judge_cpu(
    limit_cpus: float,
    probe: TrialFacts | BaseException | None,
    reference: TrialFacts | BaseException | None,
    declared: bool,
) -> CpuCheck:
    """Whether a CPU quota bites on a target: a spin under the quota against the same spin without one.

    ``limited`` is False (not limited), True, or None (not checkable: the host is too busy, or no
    CPU time was reported). A backend that declares no quota is not limited whatever was measured.
    """
    spin = _spin(probe) if isinstance(probe, TrialFacts) else {}
    ref = _spin(reference) if isinstance(reference, TrialFacts) else {}
    share = spin["spin_cpu_s"] / spin["spin_wall_s"] if spin.get("spin_wall_s") else None
    ref_share = ref["spin_cpu_s"] / ref["spin_wall_s"] if ref.get("spin_wall_s") else None
    out = CpuCheck(
        limit_cpus=limit_cpus,
        declared=declared,
        problems=[],
        notes=[],
        cpu_share=share,
        unlimited_cpu_share=ref_share,
        limited=None,
    )
    if not declared:
        out.limited = False
        out.problems.append("CPU not limited: the backend declares no CPU quota")
    if share is None:
        out.notes.append("CPU quota not measured: the spinning try reported no CPU time")
    elif ref_share is not None and ref_share <= limit_cpus * CPU_SLACK:
        out.notes.append(
            f"CPU quota not measured: the host is too busy (an unlimited spin got only {ref_share:.2f} cpu)"
        )
    elif share > limit_cpus * CPU_SLACK:
        out.limited = False
        out.problems.append(
            f"CPU not limited: a spinning thread got {share:.2f} cpu under a {limit_cpus:g}-cpu quota"
            + (f" (without a quota: {ref_share:.2f})" if ref_share is not None else "")
        )
    elif declared:
        out.limited = True
    return out


def run_canary(
    backend: Backend, configs: list[ResourceConfig], *, deadline_s: float = DEADLINE_S, image: str | None = None
) -> CanaryVerdict:
    """Run the canary for every configuration on every target; the provenance record."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    task = load_task(CANARY_TASK)
    env = task.spec.environment
    per_node = canary_targets(backend)
    targets: list[str] = list(per_node.canary_targets()) if per_node else ["local"]
    skipped = [SkippedTarget.model_validate(s) for s in per_node.canary_skipped()] if per_node else []
    if not targets:
        out = not_run(
            "no node to check: "
            + ("; ".join(f"{s.target}: {s.reason}" for s in skipped[:5]) or "the backend named none")
        )
        out.started_at, out.skipped_targets = started, skipped
        return out
    run_id = f"canary-{uuid.uuid4().hex[:8]}"
    bounded = [(c, a) for c in configs if (a := _amounts(c, env.cpus, env.memory_mb)) is not None]
    pending: dict[str, tuple[str, str, str, Handle]] = {}
    results: dict[tuple[str, str, str], TrialFacts | BaseException | None] = {}

    def submit(config: ResourceConfig, which: str, target: str, mb: int, spin: float, amounts: ResourceAmounts) -> None:
        launch = _launch(run_id, config, which, target, mb, spin, amounts, image)
        try:
            pending[launch.name] = (config.label, target, which, backend.submit(launch))
        except Exception as exc:  # a backend that refuses the try is a finding, not a crash of the sweep
            results[(config.label, target, which)] = exc

    probe_amounts = _amounts(ResourceConfig.parse("1x-strict"), env.cpus, env.memory_mb)
    assert probe_amounts is not None
    free = ResourceAmounts(
        request_cpus=env.cpus, request_memory_bytes=env.memory_mb * MIB, limit_cpus=None, limit_memory_bytes=None
    )
    end = time.monotonic() + deadline_s

    def collect() -> None:
        """Observe the pending tries until none is left or the canary's deadline has passed."""
        while pending and time.monotonic() < end:
            backend.wait([p[3] for p in pending.values()], 0.2)
            for name, (label, target, which, handle) in list(pending.items()):
                try:
                    got: TrialFacts | BaseException | None = backend.observe(handle)
                except Exception as exc:  # recorded as the canary's result, not raised: the report shows it
                    got = exc
                if got is not None:
                    results[(label, target, which)] = got
                    del pending[name]
                    recorded(backend, handle)  # a canary's result lives in memory: nothing to wait for

    for target in targets:
        for config, amounts in bounded:
            above_mb, below_mb = hog_sizes(amounts.limit_memory_bytes or 0)
            submit(config, "above", target, above_mb, 0.0, amounts)
            submit(config, "below", target, below_mb, 0.0, amounts)
    collect()
    # The CPU pair runs once the memory tries are over: on a small node their start-up (runtime,
    # python) would eat the CPU the pair measures and leave the check "too busy" to tell.
    for target in targets if bounded else []:
        # One spin under the canary's quota and the same spin with none, side by side: the
        # second says how much CPU this host gives a spinning thread right now.
        submit(ResourceConfig.parse("1x-strict"), "cpu-probe", target, 1, SPIN_S, probe_amounts)
        submit(ResourceConfig(limit_multiplier=None), "cpu-reference", target, 1, SPIN_S, free)
    collect()
    for label, target, which, handle in pending.values():
        backend.cancel(handle)
        results[(label, target, which)] = None
    checks: list[CanaryArm] = []
    cpu: dict[str, CpuCheck] = {}
    for target in targets:
        if bounded:
            cpu[target] = judge_cpu(
                env.cpus,
                results.get(("1x-strict", target, "cpu-probe")),
                results.get(("unbounded", target, "cpu-reference")),
                backend.abilities.cpu_quota,
            )
        for config in configs:
            arm = _amounts(config, env.cpus, env.memory_mb)
            if arm is None:
                checks.append(
                    CanaryArm(
                        config=config.label,
                        target=target,
                        status="skipped",
                        limit_memory_bytes=None,
                        limit_cpus=None,
                        above=CanaryTry(),
                        below=CanaryTry(),
                        problems=[],
                        notes=["no limit to check (unbounded)"],
                    )
                )
                continue
            check = judge(
                config.label,
                target,
                arm,
                results.get((config.label, target, "above")),
                results.get((config.label, target, "below")),
            )
            if cpu[target].limited is False:
                check.problems += cpu[target].problems
                if check.status == "enforced":
                    check.status = "weak"
            check.notes += cpu[target].notes
            checks.append(check)
    return record(checks, backend, started, cpu, skipped)


def _worst(statuses: list[str]) -> str:
    for s in ("not_enforced", "inconclusive", "weak", "enforced"):
        if s in statuses:
            return s
    return "skipped"


def record(
    checks: list[CanaryArm],
    backend: Backend,
    started: str,
    cpu: dict[str, CpuCheck] | None = None,
    skipped: list[SkippedTarget] | None = None,
) -> CanaryVerdict:
    flagged = [c for c in checks if c.status not in ("enforced", "skipped")]
    targets = sorted({c.target for c in checks})
    return CanaryVerdict(
        status="flagged" if flagged else "enforced",
        backend=backend.name,
        enforcement=backend.abilities.enforcement,
        started_at=started,
        targets=targets,
        # per target (node): the worst verdict of its configurations
        by_target={t: _worst([c.status for c in checks if c.target == t]) for t in targets},
        skipped_targets=skipped or [],
        arms=checks,
        cpu=cpu or {},
        problems=sorted({f"{c.config} on {c.target}: {p}" for c in flagged for p in c.problems}),
    )
