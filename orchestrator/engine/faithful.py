"""Refuse, before a sweep, the tasks its backend cannot run faithfully (docs/import.md, "What a backend refuses").

A task that needs what the backend cannot give still runs, and its trials score as the model's failures: the
oracle of a Terminal-Bench 2 task run on the host, without its image, fails. So every need of every task
(``orchestrator/tasks/needs.py``) is held against what the backend declares (its ``abilities``: the class's, or
the declaration it narrowed to this host), and the sweep is refused with one line per class of need: which tasks, what they need,
and what can run them. ``tasks validate --backend NAME`` runs the same check from the backend's declaration.

Running image tasks on the host anyway is the experiment's explicit ``run_on_host``; :func:`record` says which
tasks it applied to, for the provenance and the reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.errors import NotFaithful, UserError
from orchestrator.spec.provenance import FaithfulCheck
from orchestrator.tasks.needs import (
    ARCH,
    COMPOSE,
    GPUS,
    IMAGE,
    INTERNET,
    ORACLE,
    OS,
    TPU,
    Need,
    shown,
    task_needs,
)

if TYPE_CHECKING:
    from orchestrator.backends.base import Backend
    from orchestrator.spec.backend import BackendAbilities
    from orchestrator.spec.experiment import Experiment
    from orchestrator.spec.task import Task

#: Classes in the order the refusal lists them.
ORDER = (IMAGE, COMPOSE, GPUS, TPU, ARCH, OS, INTERNET)
SHOWN_TASKS = 5


@dataclass(frozen=True)
class Profile:
    """A backend's name and what it can give a task: a live backend's abilities, or its class's declaration."""

    name: str
    abilities: BackendAbilities

    @property
    def architectures(self) -> list[str]:
        """Empty: not known (not checked)."""
        return self.abilities.architectures

    @classmethod
    def of(cls, backend: Backend) -> Profile:
        from orchestrator.backends.abilities import architecture_reader

        # a cluster's architectures are its schedulable nodes', read now (a node pool may have changed)
        if (reader := architecture_reader(backend)) is not None:
            reader.node_architectures()  # the backend keeps them in its abilities, for the provenance
        return cls(backend.name, backend.abilities)

    @classmethod
    def declared(cls, name: str) -> Profile:
        """Without constructing the backend (no daemon or cluster needed): the local one declares this host's
        CPUs; a docker daemon's or a cluster's architecture is checked when a sweep connects to it."""
        from orchestrator import backends

        return cls(name, backends.declared_abilities(name))

    def with_architectures(self, architectures: Sequence[str]) -> Profile:
        return Profile(self.name, self.abilities.model_copy(update={"architectures": list(architectures)}))


@dataclass
class Check:
    """The outcome of one check: refusal lines, and the tasks run on the host by the experiment's choice."""

    lines: list[str] = field(default_factory=list)
    on_host: dict[str, str] = field(default_factory=dict)  # task id -> the image it would have needed

    def record(self, profile: Profile, run_on_host: bool) -> FaithfulCheck:
        return FaithfulCheck(
            backend=profile.name,
            run_on_host=run_on_host,
            tasks_run_on_host=dict(sorted(self.on_host.items())),
            architectures=list(profile.architectures),
        )


def _capable(predicate: str) -> list[str]:
    from orchestrator import backends

    out = []
    for name in backends.names():
        try:
            if getattr(backends.declared_abilities(name), predicate):
                out.append(name)
        except UserError:  # a backend whose package is missing can run nothing here
            continue
    return out


def _tasks(items: Sequence[tuple[str, Need]]) -> str:
    shown_items = [f"{shown(tid, 60)} ({n.detail})" for tid, n in items[:SHOWN_TASKS]]
    more = f" and {len(items) - SHOWN_TASKS} more" if len(items) > SHOWN_TASKS else ""
    return "; ".join(shown_items) + more


def _count(items: Sequence[tuple[str, Need]], verb: str) -> str:
    """``4 tasks need`` / ``1 task needs``."""
    n = len({tid for tid, _ in items})
    return f"{n} tasks {verb}" if n != 1 else f"1 task {verb}s"


def check_tasks(
    tasks: Sequence[Task],
    profile: Profile,
    *,
    run_on_host: bool = False,
    env_network: bool = False,
    oracle_network: bool = False,
) -> Check:
    """Hold every task's needs against ``profile``; ``env_network``/``oracle_network``: what the sweep allows."""
    by_kind: dict[str, list[tuple[str, Need]]] = {k: [] for k in ORDER}
    for t in sorted(tasks, key=lambda t: t.id):
        for need in task_needs(t):
            by_kind[need.kind].append((t.id, need))
    out = Check()
    images = by_kind[IMAGE]
    can_do = profile.abilities
    if images and not can_do.task_images:
        if run_on_host:
            out.on_host = {tid: n.detail for tid, n in images}
        else:
            can = _capable("task_images")
            out.lines.append(
                f"container image: {_count(images, 'need')} their image, which the {profile.name} backend does not run "
                f"(it runs tasks on the host, so their scripts would fail for want of the image's files): "
                f"{_tasks(images)}. Run them with --backend {' or '.join(can) or 'a container backend'}, or give "
                "--run-on-host (experiment: run_on_host: true) to run them on the host anyway, recorded as such"
            )
    if (compose := by_kind[COMPOSE]) and not can_do.multi_container:
        can = _capable("multi_container")
        where = f"--backend {' or '.join(can)}" if can else "no headroom backend starts a task's other services yet"
        out.lines.append(
            f"multi-container: {_count(compose, 'need')} services beside their own container, which the "
            f"{profile.name} backend does not start: {_tasks(compose)}. {where[0].upper() + where[1:]}"
        )
    if (gpus := by_kind[GPUS]) and not can_do.gpus:
        can = _capable("gpus")
        where = f"run them with --backend {' or '.join(can)}" if can else "no headroom backend gives GPUs yet"
        out.lines.append(
            f"GPUs: {_count(gpus, 'need')} GPUs, which the {profile.name} backend cannot give: {_tasks(gpus)}; {where}"
        )
    if tpus := by_kind[TPU]:  # Harbor's [environment] tpu: a GKE TPU slice
        out.lines.append(
            f"TPUs: {_count(tpus, 'need')} a TPU slice, which no headroom backend gives "
            f"(the {profile.name} backend would run them without one): {_tasks(tpus)}"
        )
    if profile.architectures:
        wrong = [(tid, n) for tid, n in by_kind[ARCH] if n.value not in profile.architectures]
        if wrong:
            wanted = "/".join(sorted({n.value for _, n in wrong}))
            has = "/".join(profile.architectures)
            if profile.name == "kubernetes":
                where, advice = (
                    f"no schedulable node has them (the nodes a trial pod could land on run {has})",
                    f"Add {wanted} nodes, or point kubernetes.node_selector / tolerations at the pool that has them",
                )
            else:
                where, advice = (
                    f"the {profile.name} backend runs on {has}",
                    f"Run them on a {wanted} machine (--backend docker with DOCKER_HOST pointing at one) or cluster "
                    "(--backend kubernetes)",
                )
            out.lines.append(
                f"CPU architecture: {_count(wrong, 'need')} {wanted} CPUs and {where}: {_tasks(wrong)}. {advice}"
            )
    if other_os := by_kind[OS]:  # Harbor's [environment] os = "windows"
        wanted = "/".join(sorted({n.value for _, n in other_os}))
        out.lines.append(
            f"operating system: {_count(other_os, 'need')} {wanted} containers, which the {profile.name} backend does "
            f"not run (no headroom backend does; they run Linux): {_tasks(other_os)}"
        )
    carried = [t for t in sorted(tasks, key=lambda t: t.id) if t.spec.verifier.outputs]
    if carried and not can_do.verifier_outputs:
        can = _capable("verifier_outputs")
        names = "; ".join(f"{shown(t.id, 60)} ({', '.join(t.spec.verifier.outputs)})" for t in carried[:SHOWN_TASKS])
        more = f" and {len(carried) - SHOWN_TASKS} more" if len(carried) > SHOWN_TASKS else ""
        n = len(carried)
        out.lines.append(
            f"verifier outputs: {n} task{'s' if n != 1 else ''} declare{'s' if n == 1 else ''} folders besides the "
            f"work dir for the verifier ([verifier] outputs), which the {profile.name} backend does not carry to its "
            f"verifier (it would grade without them): {names}{more}. Run them with --backend {' or '.join(can)}"
        )
    if can_do.network_control:
        offline = [
            (tid, n) for tid, n in by_kind[INTERNET] if not (oracle_network if n.where == ORACLE else env_network)
        ]
        if offline:
            out.lines.append(
                f"network: {_count(offline, 'need')} the internet, which this sweep does not allow: {_tasks(offline)}. "
                "Give --allow-internet (experiment: allow_internet: true, or environment.network / agent.network), "
                "or set allow_internet = false in a task that in fact runs offline"
            )
    return out


def arch_unchecked(tasks: Sequence[Task], profile: Profile) -> dict[str, str]:
    """Tasks that declare a CPU architecture the check could not hold against the backend's (not known without
    connecting: a daemon's, a cluster's nodes'), task id -> the architecture; a sweep checks them when it connects."""
    if profile.architectures:
        return {}
    return {t.id: n.value for t in sorted(tasks, key=lambda t: t.id) for n in task_needs(t) if n.kind == ARCH}


def check_experiment(experiment: Experiment, tasks: Sequence[Task], profile: Profile) -> Check:
    """The check for what this experiment allows (its network, its run_on_host, its image for every task)."""
    from orchestrator.engine.launch import _agent_network, _env_network

    got = check_tasks(
        tasks,
        profile,
        run_on_host=experiment.run_on_host,
        env_network=_env_network(experiment),
        # solution/solve.sh runs only as the oracle agent
        oracle_network=experiment.agent.kind != "oracle" or _agent_network(experiment),
    )
    if experiment.image and not profile.abilities.task_images and not experiment.run_on_host:
        can = _capable("task_images")
        got.lines = [ln for ln in got.lines if not ln.startswith("container image:")]  # one image: the experiment's
        got.lines.insert(
            0,
            f"container image: the experiment's image {shown(experiment.image)} (every task's environment) is not run "
            f"by the {profile.name} backend, which runs tasks on the host. Run with --backend {' or '.join(can)}, or "
            "give --run-on-host (experiment: run_on_host: true) to run them on the host anyway, recorded as such",
        )
    elif experiment.image and not profile.abilities.task_images:
        got.on_host.update({t.id: f"the experiment's image {shown(experiment.image)}" for t in tasks})
    return got


def check(experiment: Experiment, tasks: Sequence[Task], backend: Backend) -> FaithfulCheck:
    """Refuse the sweep (:class:`NotFaithful`) or return what the provenance records of the check."""
    profile = Profile.of(backend)
    got = check_experiment(experiment, tasks, profile)
    if got.lines:
        raise NotFaithful(profile.name, got.lines)
    return got.record(profile, experiment.run_on_host)


def controller_refusal(
    experiment: Experiment,
    tasks: Sequence[Task],
    backend: str = "kubernetes",
    architectures: Sequence[str] = (),
) -> str | None:
    """The in-cluster controller's form of the refusal: one message for the Experiment's SpecInvalid condition,
    the classes joined by `` | `` (a condition message is one line), or None when every task can run.
    ``architectures``: those of the schedulable nodes the controller read (empty: not known, not checked)."""
    profile = Profile.declared(backend).with_architectures(architectures)
    got = check_experiment(experiment, tasks, profile)
    return f"not faithful on the {backend} backend: " + " | ".join(got.lines) if got.lines else None
