"""Orchestrator overhead per trial, against running the same commands bare, with and without the sandbox.

    python benchmarks/bench_overhead.py [--trials 60] [--repeats 3]

The workload is a short real program (agent: a Python process that writes a
file; verifier: a shell test that writes the reward). "bare" runs the same two
commands with subprocess, nothing else. "unsandboxed" runs them as trials
through the whole engine (plan, SQLite store in WAL mode, a cgroup per trial
with limits, disk watch, classification, evidence) with ``isolation="none"``;
"sandboxed" is the same with each step in its bubblewrap sandbox, as headroom
runs by default. All three are measured in this run, interleaved, at
concurrency 1 and 2, and reported as medians per trial; "sandbox +ms" is the
sandbox's added cost per trial (sandboxed - unsandboxed). "cpu ms" is CPU time per trial of this
process (the engine, its threads) plus the children it reaped (the steps, as far as their own
parents reaped them: a sandboxed step's processes inside bwrap's PID namespace are partly missing
there), and the load average is printed before and after: on a shared machine only ratios within
one run compare. "trial cgroup CPU" is what the trials' cgroups counted (every process of both steps,
those in bubblewrap's PID namespace too): the sandbox's CPU is the difference of its two columns, a
figure a loaded machine inflates far less than wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine.sweep import prepare, run, start
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.resources import ResourceConfig
from orchestrator.store.sqlite import Store

#: One interpreter for all three, and one the sandbox can see (it mounts /usr, not a home dir's pyenv shims,
#: which would otherwise make "bare" slower than "sandboxed" for a reason that has nothing to do with headroom).
PY = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), "python3")
SOLVE = f"{PY} -c \"open('$HEADROOM_WORKDIR/out', 'w').write('x' * 1000)\"\n"
TEST = 'if [ -f "$HEADROOM_WORKDIR/out" ]; then echo 1; else echo 0; fi > "$HEADROOM_LOGS_DIR/reward.txt"\n'


def make_task(root: Path) -> Path:
    d = root / "tasks" / "write-file"
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "task.toml").write_text(
        "[environment]\ncpus = 1\nmemory_mb = 256\n[agent]\ntimeout_sec = 30\n[verifier]\ntimeout_sec = 30\n"
    )
    (d / "instruction.md").write_text("write a file\n")
    (d / "solution" / "solve.sh").write_text(SOLVE)
    (d / "tests" / "test.sh").write_text(TEST)
    return d


def cpu_s() -> float:
    """User + system CPU of this process and of the children it reaped, so far."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bare(task: Path, trials: int, concurrency: int, scratch: Path) -> float:
    def one(i: int) -> None:
        work = scratch / f"bare-{i}"
        logs = work / "logs"
        logs.mkdir(parents=True)
        env = {"PATH": os.environ["PATH"], "HEADROOM_WORKDIR": str(work), "HEADROOM_LOGS_DIR": str(logs)}
        subprocess.run(["bash", str(task / "solution" / "solve.sh")], env=env, cwd=work, check=True)
        subprocess.run(["bash", str(task / "tests" / "test.sh")], env=env, cwd=work, check=True)
        assert (logs / "reward.txt").read_text().strip() == "1"

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(trials)))
    return (time.perf_counter() - t0) / trials


def headroom(root: Path, trials: int, concurrency: int, tag: str, isolation: str) -> tuple[float, str, float | None]:
    """Wall time per trial, the backend's enforcement, and the trial cgroups' CPU time per trial (every process of
    both steps, those in bubblewrap's PID namespace included: the store's ``cpu_time_s``; None without cgroups)."""
    exp = Experiment(
        tasks_dir=str(root / "tasks"),
        configurations=[ResourceConfig.parse("1x/3x")],
        attempts=trials,
        concurrency=concurrency,
    )
    tasks = prepare(exp)
    store = Store(root / f"bench-{tag}-{isolation}.db")
    backend = LocalBackend(isolation=isolation)  # type: ignore[arg-type]
    try:
        run_id, tmap = start(exp, tasks, store, backend)
        t0 = time.perf_counter()
        result = run(store, run_id, exp, tmap, backend)
        elapsed = time.perf_counter() - t0
        (cg_cpu,) = store.db.execute("SELECT sum(cpu_time_s) FROM executions WHERE run_id=?", (run_id,)).fetchone()
    finally:
        backend.close()
    assert result.summary.outcomes == {"passed": trials}, result.summary.outcomes
    mech = f"{backend.abilities.enforcement}, isolation {backend.abilities.isolation}"
    return elapsed / trials, mech, cg_cpu / trials if cg_cpu is not None else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = make_task(root)
        print(f"{args.trials} trials per measurement, {args.repeats} repeats, medians of per-trial wall time")
        print(f"load average at start: {load()}")
        print(
            f"{'concurrency':>11}  {'bare ms':>8}  {'unsandboxed ms':>14}  {'sandboxed ms':>12}  {'sandbox +ms':>11}  "
            f"{'engine +ms':>10}  {'ratio':>6}  {'cpu ms bare/unsandboxed/sandboxed':>33}  enforcement"
        )
        for conc in (1, 2):
            b, u, s = [], [], []
            cb, cu, cs = [], [], []
            gu: list[float] = []
            gs: list[float] = []
            mech = ""
            for r in range(args.repeats):  # interleaved, so drift hits all three alike
                c0 = cpu_s()
                b.append(bare(task, args.trials, conc, root / f"scratch-{conc}-{r}"))
                c1 = cpu_s()
                tu, _, g = headroom(root, args.trials, conc, f"{conc}-{r}", "none")
                u.append(tu)
                gu += [g] if g is not None else []
                c2 = cpu_s()
                t, mech, g = headroom(root, args.trials, conc, f"{conc}-{r}", "sandbox")
                c3 = cpu_s()
                s.append(t)
                gs += [g] if g is not None else []
                cb.append((c1 - c0) / args.trials)
                cu.append((c2 - c1) / args.trials)
                cs.append((c3 - c2) / args.trials)
            mb, mu, ms = statistics.median(b), statistics.median(u), statistics.median(s)
            cpu = "/".join(f"{statistics.median(c) * 1000:.1f}" for c in (cb, cu, cs))
            print(
                f"{conc:>11}  {mb * 1000:>8.1f}  {mu * 1000:>14.1f}  {ms * 1000:>12.1f}  {(ms - mu) * 1000:>11.1f}  "
                f"{(mu - mb) * 1000:>10.1f}  {ms / mb:>6.2f}  {cpu:>33}  {mech}"
            )
            if gu and gs:
                steps = (statistics.median(gu) * 1000, statistics.median(gs) * 1000)
                print(
                    f"{'':>11}  trial cgroup CPU ms unsandboxed / sandboxed {steps[0]:.1f} / {steps[1]:.1f}: "
                    f"the sandbox's CPU {steps[1] - steps[0]:+.1f} ms a trial (both steps, all their processes)"
                )
        print("sandbox +ms = sandboxed - unsandboxed; engine +ms = unsandboxed - bare; ratio = sandboxed / bare")
        print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
