"""Link bombs: the time per trial of the deep and long link-chain cases vs an honest trial, in the same run.

Runs the hostile corpus's link-bomb cases (tests/hostile/corpus.py: 13 links whose targets
go 800 missing components deep and back, twice; a chain of 1500 links) and its honest
control (a wrong answer, no links) on the local backend (the bubblewrap sandbox) through
the CLI, ``--trials`` times each, and reports per case the median wall time of a trial
and of its sanitiser phase, and the ratio to the honest trial's. A bomb is bounded when
its ratio stays small and its sanitiser ends within its budget (20 s) either way.

    python benchmarks/bench_link_bomb.py [--trials 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the corpus lives with the tests it is written for

from orchestrator.store.sqlite import Store  # noqa: E402
from tests.hostile import corpus  # noqa: E402

CASES = ("control-wrong-answer", "link-bomb-deep-missing-targets", "link-bomb-long-chain")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    cases = [c for c in corpus.CASES if c.name in CASES]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tasks"
        corpus.write_corpus(root, cases, tests_at="/task/tests")
        store = Path(tmp) / "bench.db"
        res = subprocess.run([sys.executable, "-m", "orchestrator", "sweep", str(root), "--multipliers", "unbounded",
                              "--attempts", str(args.trials), "--concurrency", "1", "--agent-command",
                              'bash "$HEADROOM_TASK_DIR/environment/attack.sh"', "--store", str(store),
                              "--format", "none"], capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"the sweep failed: {res.stderr[-2000:]}")
        s = Store.open_existing(store)
        try:
            run_id = s.run().run_id
            tasks = {t.trial_id: t.task_id for t in s.planned(run_id)}
            rows = s.db.execute("SELECT trial_id, outcome, reason FROM executions WHERE run_id=? AND final=1",
                                (run_id,)).fetchall()
            wall: dict[str, list[float]] = {c: [] for c in CASES}
            san: dict[str, list[float]] = {c: [] for c in CASES}
            verdicts: dict[str, set[str]] = {c: set() for c in CASES}
            for r in rows:
                task = tasks[r["trial_id"]]
                verdicts[task].add(f"{r['outcome']}({r['reason']})" if r["reason"] else r["outcome"])
                for ev in s.evidence(run_id, r["trial_id"]):
                    wall[task].append(float(ev["duration_s"]))
                    san[task].append(float((ev["extra"].get("sanitiser") or {}).get("duration_s") or 0.0))
        finally:
            s.close()
    base = statistics.median(wall["control-wrong-answer"])
    print(f"local backend, {args.trials} trial(s) per case, medians")
    print(f"{'case':<34} {'trial s':>8} {'sanitiser s':>12} {'x honest':>9}  verdicts")
    for c in CASES:
        w = statistics.median(wall[c])
        print(f"{c:<34} {w:8.2f} {statistics.median(san[c]):12.2f} {w / base:9.2f}  {', '.join(sorted(verdicts[c]))}")


if __name__ == "__main__":
    main()
