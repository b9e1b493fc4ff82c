"""`headroom --help` stays fast because the command line imports no heavy library until a command runs.

The time itself is measured by benchmarks/bench_cli_startup.py; here, the behaviour behind it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Libraries (and pydantic, whose models take ~0.2 s to build) that no command needs before it runs.
HEAVY = (
    "numpy",
    "scipy",
    "pandas",
    "statsmodels",
    "pyarrow",
    "kubernetes",
    "matplotlib",
    "httpx",
    "datasketch",
    "pydantic",
)

PROBE = """
import json, sys
from orchestrator.cli import cli
command, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["headroom", *command, "--help"]
try:
    cli.main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(m for m in heavy if m in sys.modules)}))
"""


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["sweep"],
        ["resume"],
        ["report"],
        ["runs"],
        ["runs", "list"],
        ["runs", "compare"],
        ["runs", "calibrate"],
        ["runs", "bundle"],
        ["runs", "cleanup"],
        ["tasks"],
        ["tasks", "validate"],
        ["tasks", "audit"],
        ["results", "import"],
        ["cluster", "status"],
        ["view"],
    ],
    ids=lambda c: " ".join(c) or "headroom",
)
def test_help_imports_no_heavy_library(command: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(command), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    assert result["loaded"] == []


def test_running_a_command_still_loads_what_it_needs() -> None:
    """The probe can see a heavy import: the report path does load pandas (so the test above can fail)."""
    code = (
        "import sys; from orchestrator.store.sqlite import Store; import orchestrator.report.document; "
        "print('pandas' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "True", proc.stderr
