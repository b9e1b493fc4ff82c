"""Link bombs: the time per trial of each link-bomb case, as a ratio to a trivial trial's in the same run.

Runs the hostile corpus's link cases (tests/hostile/corpus.py) and its trivial control (a wrong
answer, no links) on the local backend (the bubblewrap sandbox) through the CLI, ``--trials``
times each, and reports per case the median wall time of a trial and of its sanitiser phase,
each divided by the control's (measured in the same run, so the ratios hold on a busy machine
too), and the verdicts against the corpus's table:

* ``link-bomb-deep-missing-targets``: links whose targets go 800 missing components deep and back;
* ``link-bomb-long-chain``: a chain of 1,500 links (O(N^2) hops in all, within the count bound: judged);
* ``past-the-link-count-bound``: 2,100 links, past the sanitiser's count bound: removed unjudged at once;
* ``link-bomb-exponential``: 4 links of 100 components over 3 levels, which one ``readlink -m`` expands
  to 10^6 components (it ran for over ten minutes): each resolution is bounded
  (``orchestrator.contract.sanitiser.RESOLVE_S``), the first past it stops the judging.

A bomb is bounded when its ratio stays small; the cases past a bound end ``failed(unjudged_state)``.
Exits non-zero when a case's verdict is not the corpus's.

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

from orchestrator.spec.facts import TrialFacts  # noqa: E402
from orchestrator.store.sqlite import Store  # noqa: E402
from tests.hostile import corpus  # noqa: E402

CONTROL = "control-wrong-answer"
CASES = (
    CONTROL,
    "link-bomb-deep-missing-targets",
    "link-bomb-long-chain",
    "past-the-link-count-bound",
    "link-bomb-exponential",
)


def _verdict(outcome: str, reason: str | None) -> str:
    return f"{outcome}({reason})" if reason else outcome


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    cases = [c for c in corpus.CASES if c.name in CASES]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tasks"
        corpus.write_corpus(root, cases, tests_at="/task/tests")
        store = Path(tmp) / "bench.db"
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "orchestrator",
                "sweep",
                str(root),
                "--multipliers",
                "unbounded",
                "--attempts",
                str(args.trials),
                "--concurrency",
                "1",
                "--agent-command",
                'bash "$HEADROOM_TASK_DIR/environment/attack.sh"',
                "--store",
                str(store),
                "--format",
                "none",
            ],
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            sys.exit(f"the sweep failed: {res.stderr[-2000:]}")
        s = Store.open_existing(store)
        try:
            run_id = s.run().run_id
            tasks = {t.trial_id: t.task_id for t in s.planned(run_id)}
            rows = s.db.execute(
                "SELECT trial_id, outcome, reason FROM executions WHERE run_id=? AND final=1", (run_id,)
            ).fetchall()
            wall: dict[str, list[float]] = {c: [] for c in CASES}
            san: dict[str, list[float]] = {c: [] for c in CASES}
            verdicts: dict[str, set[str]] = {c: set() for c in CASES}
            for r in rows:
                task = tasks[r["trial_id"]]
                verdicts[task].add(_verdict(r["outcome"], r["reason"]))
                for ev in map(TrialFacts.from_stored, s.evidence(run_id, r["trial_id"])):
                    wall[task].append(ev.duration_s)
                    sanitiser = ev.extra.sanitiser
                    san[task].append((sanitiser.duration_s or 0.0) if sanitiser is not None else 0.0)
        finally:
            s.close()
    base, base_san = statistics.median(wall[CONTROL]), statistics.median(san[CONTROL])
    want = {c: _verdict(*corpus.expected(cases)[c]) for c in CASES}
    print(
        f"local backend, {args.trials} trial(s) per case, medians; ratios to the trivial trial ({CONTROL}) "
        f"of this run: {base:.2f} s a trial, {base_san:.2f} s its sanitiser"
    )
    print(f"{'case':<32} {'trial s':>8} {'x trivial':>10} {'sanitiser s':>12} {'x trivial':>10}  verdict (expected)")
    wrong = []
    for c in CASES:
        w, sw = statistics.median(wall[c]), statistics.median(san[c])
        got = ", ".join(sorted(verdicts[c]))
        mark = "" if verdicts[c] == {want[c]} else f"  MISMATCH: expected {want[c]}"
        if mark:
            wrong.append(c)
        print(f"{c:<32} {w:8.2f} {w / base:10.2f} {sw:12.2f} {sw / max(base_san, 1e-3):10.2f}  {got}{mark}")
    if wrong:
        sys.exit(f"verdicts differ from the corpus's table: {', '.join(wrong)}")


if __name__ == "__main__":
    main()
