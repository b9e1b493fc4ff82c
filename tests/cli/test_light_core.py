"""A light core: the local backend, the reports and the viewer neither need nor import the Kubernetes or Docker
client (extras `[kubernetes]` and `[docker]` bring them), and a command that needs a missing one says which extra
to install, on one line.

Each check runs a real headroom in a fresh interpreter (a subprocess), so nothing an earlier test imported counts.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from orchestrator.extras import EXTRAS
from tests.taskfactory import write_task

ROOT = Path(__file__).resolve().parents[2]
#: The clients only a cluster or a container path needs.
CLUSTER_ONLY = sorted(EXTRAS)

#: Runs `headroom ARGS` (argv[2:]) in this interpreter, then lists which of argv[1]'s modules it loaded. With
#: HIDE set, those modules cannot be imported at all: the core install, where they are absent.
PROBE = """
import importlib.abc, json, os, sys
watched = json.loads(sys.argv[1])
if os.environ.get("HIDE"):
    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in watched:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, Absent())
code = 0
if sys.argv[2] == "--import":
    __import__(sys.argv[3])
else:
    from orchestrator.cli import main
    sys.argv = ["headroom", *sys.argv[2:]]
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "loaded": sorted({m.split(".")[0] for m in sys.modules} & set(watched))}))
"""


def probe(
    *args: str, cwd: Path, hide: bool = False, watched: list[str] = CLUSTER_ONLY
) -> tuple[dict[str, object], str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), **({"HIDE": "1"} if hide else {})}
    res = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(watched), *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.stdout.strip(), res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


@pytest.fixture
def swept(tmp_path: Path) -> Path:
    """A store holding one local sweep, run with the cluster and container clients absent."""
    write_task(tmp_path / "tasks", "t", solve='touch "$HEADROOM_WORKDIR/out"\n')
    store = tmp_path / "h.db"
    out, stderr = probe(
        "sweep",
        str(tmp_path / "tasks"),
        "--multipliers",
        "1,unbounded",
        "--attempts",
        "1",
        "--store",
        str(store),
        "--format",
        "none",
        cwd=tmp_path,
        hide=True,
    )
    assert out == {"code": 0, "loaded": []}, stderr
    return store


def test_a_local_sweep_its_reports_and_the_viewer_run_without_the_cluster_clients(swept: Path) -> None:
    for fmt in ("table", "markdown", "json"):
        out, stderr = probe("report", str(swept), "--format", fmt, cwd=swept.parent, hide=True)
        assert out == {"code": 0, "loaded": []}, stderr
    out, stderr = probe("report", str(swept), "-o", str(swept.parent / "r.html"), cwd=swept.parent, hide=True)
    assert out == {"code": 0, "loaded": []} and (swept.parent / "r.html").stat().st_size > 0, stderr
    out, stderr = probe("runs", "--store", str(swept), cwd=swept.parent, hide=True)
    assert out == {"code": 0, "loaded": []}, stderr


#: What only a report (the statistics, the plots) or a run with a model gateway (the web server) needs.
REPORT_OR_GATEWAY_ONLY = ["pandas", "scipy", "statsmodels", "matplotlib", "uvicorn", "starlette", "fastapi"]


def test_a_sweep_that_prints_no_report_and_calls_no_model_imports_no_statistics_or_web_server(tmp_path: Path) -> None:
    # Every sweep paid about half a second of CPU for pandas (the overcommit module's report helper) and uvicorn
    # (the gateway's module, imported with the engine) before it ran a trial; neither is used on this path.
    write_task(tmp_path / "tasks", "t", solve='touch "$HEADROOM_WORKDIR/out"\n')
    args = ("sweep", str(tmp_path / "tasks"), "--attempts", "1", "--store", str(tmp_path / "h.db"), "--format", "none")
    out, stderr = probe(*args, cwd=tmp_path, watched=REPORT_OR_GATEWAY_ONLY)
    assert out == {"code": 0, "loaded": []}, stderr


@pytest.mark.parametrize("module", ["orchestrator.view.app", "orchestrator.report", "orchestrator.engine.sweep"])
def test_the_core_modules_import_no_cluster_client(module: str, tmp_path: Path) -> None:
    out, stderr = probe("--import", module, cwd=tmp_path)  # installed or not: not imported
    assert out == {"code": 0, "loaded": []}, stderr


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["sweep", "{tasks}", "--backend", "docker", "--format", "none"], "docker"),
        (["sweep", "{tasks}", "--backend", "kubernetes", "--format", "none"], "kubernetes"),
        (["cluster", "status"], "kubernetes"),
    ],
)
def test_a_path_that_needs_a_missing_client_names_its_extra_on_one_line(
    args: list[str], extra: str, tmp_path: Path
) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    out, stderr = probe(*(a.format(tasks=tmp_path / "tasks") for a in args), cwd=tmp_path, hide=True)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert out["code"] == 2 and len(lines) == 1, stderr
    assert f"headroom[{extra}]" in lines[0] and "Traceback" not in stderr, lines[0]


def _closure(requirements: list[str], extras: set[str]) -> set[str]:
    """The installed distributions these requirements pull in, transitively (markers evaluated here)."""
    seen: set[str] = set()
    todo = [(r, extras) for r in requirements]
    while todo:
        text, active = todo.pop()
        req = Requirement(text)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (active or {""})):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        todo.extend((r, set(req.extras)) for r in metadata.requires(req.name) or [])
    return seen


def test_the_core_install_leaves_the_cluster_clients_out_and_stays_as_small_as_documented() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _closure(project["dependencies"], set())
    assert not core & {"kubernetes", "docker", "prometheus-client"}, sorted(core)
    for module, (extra, _why) in EXTRAS.items():
        wanted = {Requirement(r).name.replace("_", "-") for r in project["optional-dependencies"][extra]}
        assert module.replace("_", "-") in wanted, (module, extra)
    # docs/development.md states the measured count of a fresh `pip install .`: headroom, its closure, and the pip
    # and setuptools a 3.11 venv starts with.
    stated = int(re.findall(r"\*\*(\d+) packages\*\* of a fresh", (ROOT / "docs" / "development.md").read_text())[0])
    assert len(core) + 3 <= stated, (len(core) + 3, stated)
