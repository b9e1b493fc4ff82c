"""Reports load only what they use: no plotting library outside HTML, no statsmodels umbrella, no cluster client.

`headroom report`, `runs compare` and `runs calibrate` are run after every sweep; each heavy module a
command imports but never calls costs its user up to a second of start-up (issue 32). Each command runs
for real on a real store from a real sweep; a probe then lists which of the heavy modules the process
loaded. The time itself is measured by benchmarks/bench_stats.py (its small-run case).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.taskfactory import write_task

#: Modules none of these commands uses: matplotlib is for the HTML plots only; statsmodels.api (and the
#: graphics and time-series packages it drags in) is an umbrella over what the statistics import
#: directly; the cluster and Docker clients belong to other backends.
NEVER = ("statsmodels.api", "statsmodels.tsa", "statsmodels.graphics.api", "kubernetes", "docker", "plotly")
#: What runs a sweep, not what reads one: the canary's runner, the backends, the launch and the task loader and
#: the experiment's pydantic models they bring (a tenth of a report's start-up). A report reads the canary's
#: record through ``engine/canary_verdict.py`` and the overcommit through ``engine/overcommit.py``'s reader.
SWEEP_ONLY = (
    "orchestrator.engine.canary",
    "orchestrator.engine.launch",
    "orchestrator.backends.base",
    "orchestrator.spec.experiment",
    "orchestrator.tasks.loader",
)
PLOTTING = ("matplotlib",)
#: What a command showing a stored result (orchestrator/report/stored.py) must not load: the statistics and their
#: frames, and the plots (the HTML page is stored whole).
STATISTICS = ("numpy", "pandas", "pyarrow", "scipy", "scipy.stats", "statsmodels", "matplotlib")

PROBE = """
import json, sys
from orchestrator.cli import cli
dump, heavy = sys.argv[1], json.loads(sys.argv[2])
sys.argv = ["headroom", *sys.argv[3:]]
try:
    cli.main()
except SystemExit as exc:
    code = exc.code
with open(dump, "w") as fh:
    json.dump({"code": code, "loaded": sorted(m for m in heavy if m in sys.modules)}, fh)
"""


def loaded(tmp_path: Path, *args: str, heavy: tuple[str, ...] = (*NEVER, *SWEEP_ONLY, *PLOTTING)) -> list[str]:
    """Run one headroom command in a fresh interpreter; the heavy modules it had loaded when it exited."""
    dump = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(dump), json.dumps(heavy), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dump.exists(), proc.stderr
    result = json.loads(dump.read_text())
    assert result["code"] in (0, None), proc.stderr
    return list(result["loaded"])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    write_task(root, "steady", solve='touch "$HEADROOM_WORKDIR/out"\n', extra_toml='cluster_id = "a"\n')
    write_task(root, "never", solve="exit 1\n", extra_toml='cluster_id = "b"\n')
    path = tmp_path_factory.mktemp("store") / "h.db"
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "sweep", str(root), "--multipliers", "1,unbounded"]
        + ["--attempts", "2", "--store", str(path), "--format", "none", "--model", "test-model"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_report_loads_no_plotting_or_umbrella_module(store: Path, tmp_path: Path, fmt: str) -> None:
    assert loaded(tmp_path, "report", str(store), "--format", fmt) == []


def test_html_report_loads_matplotlib_so_the_probe_can_see_it(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    with sqlite3.connect(store) as db:  # computed, not the page a test before kept (shown without matplotlib)
        db.execute("DELETE FROM derived_results")
    assert loaded(tmp_path, "report", str(store), "-o", str(out)) == ["matplotlib"]
    assert "data:image/png;base64," in out.read_text()


def test_compare_loads_no_plotting_or_umbrella_module(store: Path, tmp_path: Path) -> None:
    assert loaded(tmp_path, "runs", "compare", str(store), str(store), "--format", "json") == []


def test_calibrate_loads_no_plotting_or_umbrella_module(store: Path, tmp_path: Path) -> None:
    assert loaded(tmp_path, "runs", "calibrate", str(store), "--out-dir", str(tmp_path / "bands")) == []


@pytest.mark.parametrize(
    "command",
    [
        ("report", "{store}", "--format", "table"),
        ("report", "{store}", "--format", "json"),
        ("report", "{store}", "--format", "markdown"),
        ("report", "{store}", "-o", "{tmp}/report.html"),
        ("runs", "compare", "{store}", "{store}", "--format", "json"),
        ("runs", "calibrate", "{store}", "--out-dir", "{tmp}/bands"),
    ],
)
def test_a_stored_result_is_shown_without_the_statistics(store: Path, tmp_path: Path, command: tuple[str, ...]) -> None:
    args = [a.format(store=store, tmp=tmp_path) for a in command]
    with sqlite3.connect(store) as db:  # what an earlier case kept (the HTML page reads the kept document)
        db.execute("DELETE FROM derived_results")
    first = loaded(tmp_path, *args, heavy=STATISTICS)  # computed, then kept
    assert "scipy.stats" in first
    assert loaded(tmp_path, *args, heavy=STATISTICS) == []
