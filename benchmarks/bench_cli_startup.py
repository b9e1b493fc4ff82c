"""How long ``headroom --help`` (and each subcommand's ``--help``) takes, as a whole process.

    python benchmarks/bench_cli_startup.py [--repeats 7]

Each figure is the median wall time of a fresh interpreter running the command, so it includes
the interpreter's start, every import the command line pulls in and click rendering the help.
The baseline, measured interleaved in the same run, is ``python -c pass`` on the same
interpreter: the ratio says how much headroom adds on top of Python itself, which holds across
machines better than the seconds do. The target (issue 22) is under 0.5 s on an idle machine.

Timings are reported, never asserted: tests/cli/test_startup.py checks the behaviour behind the
number (``import orchestrator.cli`` loads no numpy, scipy, pandas, statsmodels or kubernetes).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS: list[list[str]] = [
    ["--help"],
    ["sweep", "--help"],
    ["resume", "--help"],
    ["report", "--help"],
    ["runs", "--help"],
    ["cluster", "status", "--help"],
    ["runs", "calibrate", "--help"],
    ["tasks", "validate", "--help"],
    ["results", "import", "--help"],
    ["view", "--help"],
]
HEADROOM = [sys.executable, "-m", "orchestrator"]


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    wall(HEADROOM + ["--help"])  # the first run writes the .pyc files; it is not counted
    base: list[float] = []
    times: dict[str, list[float]] = {" ".join(c): [] for c in COMMANDS}
    for _ in range(args.repeats):  # interleaved, so a burst of load on a shared machine hits both sides
        for cmd in COMMANDS:
            base.append(wall([sys.executable, "-c", "pass"]))
            times[" ".join(cmd)].append(wall(HEADROOM + cmd))
    b = statistics.median(base)
    print(f"baseline `python -c pass`: {b * 1000:.0f} ms (median of {len(base)})")
    print(f"{'command':<28} {'median ms':>10} {'x baseline':>11} {'headroom adds ms':>17}")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{'headroom ' + name:<28} {m * 1000:>10.0f} {m / b:>11.1f} {(m - b) * 1000:>17.0f}")


if __name__ == "__main__":
    main()
