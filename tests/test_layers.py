"""The import contracts in .importlinter hold, cover every top-level module, and catch a broken one.

scripts/test.sh runs ``lint-imports`` before pytest; these tests keep that check honest: a new
top-level package cannot escape the contracts by not being named in them, and an upward import or a
direct ``kubernetes`` import in a copy of the package is refused, naming the import.
"""

from __future__ import annotations

import configparser
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import orchestrator

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def contract(name: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    return parser[f"importlinter:contract:{name}"]


def lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


def top_level_modules() -> set[str]:
    return {f"orchestrator.{m.name}" for m in pkgutil.iter_modules(orchestrator.__path__)}


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(CONFIG)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_top_level_module_is_in_a_layer() -> None:
    layers = contract("layers")
    # exhaustive: lint-imports itself refuses a module of the container that no layer names.
    assert lines(layers["containers"]) == ["orchestrator"] and layers["exhaustive"] == "True"
    named = {f"orchestrator.{part.strip()}" for layer in lines(layers["layers"]) for part in layer.split("|")}
    assert top_level_modules() <= named, sorted(top_level_modules() - named)


def test_every_module_but_kube_is_held_to_the_kubernetes_contract() -> None:
    held = set(lines(contract("kubernetes")["source_modules"]))
    assert top_level_modules() - {"orchestrator.kube"} <= held
    assert "orchestrator.kube" not in held


def test_the_contracts_hold_on_the_tree() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_and_a_direct_kubernetes_import_are_refused(tmp_path: Path) -> None:
    copy = tmp_path / "orchestrator"
    shutil.copytree(ROOT / "orchestrator", copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "stats" / "proportions.py").open("a") as f:
        f.write("\nfrom orchestrator.report import document as _up  # noqa\n")
    with (copy / "engine" / "plan.py").open("a") as f:
        f.write("\nimport kubernetes as _direct  # noqa\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "orchestrator.stats.proportions -> orchestrator.report" in result.stdout, result.stdout
    assert "orchestrator.engine.plan -> kubernetes" in result.stdout, result.stdout
    assert "2 broken" in result.stdout
