"""Where a local trial's milliseconds go: timers around the local backend's parts, per trial.

    python benchmarks/bench_overhead_parts.py [--trials 30] [--isolation none,sandbox]

Runs ``bench_overhead.py``'s task as trials at concurrency 1 (after a 3-trial warm-up) and
wraps each part of the path in a timer: the trial on its worker thread (``backend.run``), each
step (``run_step``, and inside it ``Popen``, the wait for the step's main process, ``kill_tree``
after it), the trial cgroup's creation, removal and reads, the host walk, the artifacts, the
work dir's folders. Parts nest (``run_step`` holds ``Popen`` and ``wait4``), so the column does
not add up; ``engine thread`` is the whole trial less ``backend.run``: the engine's settle,
store and scheduling between trials. Each part's CPU column is its calling thread's CPU time
(``time.thread_time``), the figure a loaded machine does not inflate; the whole trial's CPU is this
process (the engine) and its reaped children (the steps). A diagnostic, not a ratio against a baseline: on a shared machine compare only
rows of one run, and read ``bench_overhead.py`` for the targets.
"""

from __future__ import annotations

import argparse
import collections
import functools
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_overhead import headroom, load, make_task

from orchestrator.backends.local import backend as local_backend
from orchestrator.backends.local import external, runner
from orchestrator.engine import execute, settle
from orchestrator.isolation import cgroups, process, removal
from orchestrator.store.sqlite import Store

TOTAL: dict[str, float] = collections.defaultdict(float)
COUNT: dict[str, int] = collections.defaultdict(int)
#: CPU time of the calling thread in each part (``time.thread_time``): on a loaded machine the wall time of a
#: part is mostly waiting for a CPU, its thread's CPU time is what the part itself costs.
CPU: dict[str, float] = collections.defaultdict(float)


def _timed(owner: Any, name: str, label: str) -> None:
    f: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(f)
    def timed(*a: Any, **k: Any) -> Any:
        t, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            TOTAL[label] += time.perf_counter() - t
            CPU[label] += time.thread_time() - c
            COUNT[label] += 1

    setattr(owner, name, timed)


def instrument() -> None:
    for owner, name, label in (
        (local_backend.LocalBackend, "run", "backend.run (the trial's thread)"),
        (local_backend, "run_try", "run_try (the contract's phases)"),
        (runner, "run_step", "run_step (one step)"),
        (process.subprocess, "Popen", "Popen (fork and exec the wrapper)"),
        (process.os, "wait4", "wait4 (the step's processes)"),
        (process, "kill_tree", "kill_tree after a step"),
        (cgroups.TrialCgroup, "kill_all", "cgroup kill_all (every call)"),
        (cgroups.CgroupDriver, "create", "cgroup create"),
        (cgroups.TrialCgroup, "remove", "cgroup remove"),
        (cgroups.TrialCgroupV1, "oom_kills", "cgroup reads (oom, usage, events)"),
        (cgroups.TrialCgroupV1, "peak_memory_bytes", "cgroup reads (oom, usage, events)"),
        (cgroups.TrialCgroupV1, "cpu_time_s", "cgroup reads (oom, usage, events)"),
        (cgroups.TrialCgroupV1, "memory_events", "cgroup reads (oom, usage, events)"),
        (cgroups.TrialCgroupV1, "cpu_throttling", "cgroup reads (oom, usage, events)"),
        (runner.LocalRunner, "nothing_to_sanitise", "host walk (sanitiser)"),
        (runner.LocalRunner, "_home", "role folders (home, tmp, shm)"),
        (runner.LocalRunner, "put_tree", "handover folders"),
        (local_backend.tempfile, "mkdtemp", "mkdtemp (work dir, put folder)"),
        (local_backend, "_make_dir", "work dir folders (app, logs)"),
        (external, "keep_artifacts", "keep_artifacts"),
        (removal.BackgroundRemoval, "submit", "work dir removal (queued)"),
        # the engine thread's own parts (execute.py calls settle by the name it imported)
        (execute, "settle", "settle (classify, redact; engine thread)"),
        (settle, "_redact_facts", "of which the redaction round trip"),
        (Store, "finish_try", "store finish_try (engine thread)"),
        (Store, "start_try", "store start_try (engine thread)"),
    ):
        _timed(owner, name, label)


def cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--isolation", default="none,sandbox")
    args = ap.parse_args()
    instrument()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_task(root)
        for isolation in args.isolation.split(","):
            headroom(root, 3, 1, f"warm-{isolation}", isolation)
            TOTAL.clear()
            COUNT.clear()
            CPU.clear()
            print(f"isolation {isolation}: {args.trials} trials at concurrency 1, load average {load()}")
            c0 = cpu()
            per, _, _ = headroom(root, args.trials, 1, f"parts-{isolation}", isolation)
            c1 = cpu()
            n = args.trials
            print(
                f"  whole trial {per * 1000:.1f} ms; CPU engine {(c1[0] - c0[0]) / n * 1000:.1f} ms, steps "
                f"{(c1[1] - c0[1]) / n * 1000:.1f} ms (reaped children)"
            )
            rows = sorted(TOTAL.items(), key=lambda kv: -kv[1])
            rows.insert(
                1, ("engine thread (trial less backend.run)", per * n - TOTAL["backend.run (the trial's thread)"])
            )
            print(f"  {'part':42s} {'wall ms':>8s}  {'CPU ms':>7s}  calls a trial")
            for label, total in rows:
                calls = f"{COUNT[label] / n:4.1f}" if label in COUNT else "    "
                used = f"{CPU[label] / n * 1000:7.2f}" if label in CPU else "       "
                print(f"  {label:42s} {total / n * 1000:8.2f}  {used}  {calls}")
        print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
