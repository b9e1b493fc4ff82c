"""Legacy Terminal-Bench task directories (``task.yaml``) converted to Harbor-style task directories.

A legacy task holds ``task.yaml`` (instruction, metadata, ``max_agent_timeout_sec``,
``max_test_timeout_sec``, ...), ``docker-compose.yaml``, ``Dockerfile``,
``run-tests.sh`` + ``tests/`` (graded by parsing pytest's output) and
``solution.sh`` (or a keystroke ``solution.yaml``). The converted directory:

* ``task.toml``: ``[agent] timeout_sec`` = max_agent_timeout_sec,
  ``[verifier] timeout_sec`` = max_test_timeout_sec, ``[environment]`` cpus and
  memory from docker-compose when it gives them (``cpus``, ``mem_limit``, or
  ``deploy.resources.limits``), else Harbor's defaults (1 CPU, 2048 MiB), said so;
  author, difficulty, category, tags and time estimates under ``[metadata]``.
* ``instruction.md``: the instruction.
* ``tests/test.sh``: runs the original ``run-tests.sh`` and writes reward 1 when it
  exits 0, else 0. With the ``pytest`` parser this is the same verdict (pytest
  exits 0 exactly when every collected test passed). A task without ``run-tests.sh``
  gets terminal-bench's default runner (pytest on ``tests/test_outputs.py``), as the
  harness gives it.
* ``solution/solve.sh``: ``solution.sh``.
* ``environment/``: the Dockerfile, docker-compose.yaml and every other file, at the
  same relative paths (the Dockerfile's build context).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from orchestrator.importers.fields import CONVERTED, DEFAULTED, KEPT, UNMAPPED, FieldReport, size_to_mib
from orchestrator.importers.harbor_task import HARBOR_DEFAULTS
from orchestrator.spec.unknown import did_you_mean

TB_DEFAULT_AGENT_TIMEOUT = 360.0  # terminal-bench's Task model defaults
TB_DEFAULT_TEST_TIMEOUT = 60.0
_METADATA = (
    "author_name",
    "author_email",
    "difficulty",
    "category",
    "tags",
    "expert_time_estimate_min",
    "junior_time_estimate_min",
    "estimated_duration_sec",
)
_UNMAPPED_NOTES = {
    "run_tests_in_same_shell": "headroom always verifies in a fresh process after the agent is gone",
    "disable_asciinema": "headroom records no terminal sessions",
    "env_name": "legacy key, kept in [metadata]",
    "test_scripts": "legacy key, kept in [metadata]",
    "descriptions": "legacy key (older task.yaml), kept in [metadata]",
}
_HANDLED = {"instruction", "max_agent_timeout_sec", "max_test_timeout_sec", "parser_name", *_METADATA}

TEST_SH = """#!/bin/bash
# Converted from a legacy Terminal-Bench task by `headroom tasks import`.
# The original grader parsed pytest's output; pytest exits 0 exactly when every test passed,
# so the exit status of run-tests.sh carries the same verdict.
here="$(cd "$(dirname "$0")" && pwd)"
logs="${HEADROOM_LOGS_DIR:-/logs/verifier}"
mkdir -p "$logs"
export TEST_DIR="${TEST_DIR:-$here}"
if bash "$here/run-tests.sh"; then echo 1 > "$logs/reward.txt"; else echo 0 > "$logs/reward.txt"; fi
"""


#: terminal-bench's harness runs its default runner when a task has no run-tests.sh (TaskPaths.run_tests_path
#: falls back to shared/defaults/run-tests.sh): pytest on the task's tests/test_outputs.py, with -rA for its
#: parser. This is the same behaviour, written for headroom: pytest as installed in the image, else through
#: uv or pip (which need the network, as the harness's default runner does).
DEFAULT_RUN_TESTS = """#!/bin/bash
# Written by `headroom tasks import` for a legacy Terminal-Bench task without run-tests.sh: terminal-bench
# then runs its default runner, pytest on the task's test_outputs.py; so does this.
here="$(cd "$(dirname "$0")" && pwd)"
tests="${TEST_DIR:-$here}"
if python3 -m pytest --version >/dev/null 2>&1; then
  exec python3 -m pytest "$tests/test_outputs.py" -rA
elif command -v uv >/dev/null 2>&1; then
  exec uv run --with pytest pytest "$tests/test_outputs.py" -rA
else
  python3 -m pip install --quiet pytest >/dev/null 2>&1 || exit 3
  exec python3 -m pytest "$tests/test_outputs.py" -rA
fi
"""


def _compose_resources(compose: dict[str, Any], rep: FieldReport) -> tuple[float | None, int | None, str | None]:
    """cpus, memory (MiB) and a fixed image from the main service of a docker-compose file."""
    services = compose.get("services") if isinstance(compose, dict) else None
    if not isinstance(services, dict) or not services:
        return None, None, None
    name = "client" if "client" in services else next(iter(services))
    if len(services) > 1:
        others = ", ".join(s for s in services if s != name)
        rep.add(UNMAPPED, "docker-compose.services", f"extra services ({others}) are not started by headroom")
    svc = services[name] or {}
    limits = ((svc.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    cpus = svc.get("cpus", limits.get("cpus"))
    mem = svc.get("mem_limit", limits.get("memory"))
    image = svc.get("image")
    out_cpus = out_mem = None
    if cpus is not None:
        out_cpus = float(cpus)
        rep.add(CONVERTED, "docker-compose.cpus", f"-> environment.cpus = {out_cpus:g}")
    if mem is not None:
        out_mem = size_to_mib(mem, bare_unit="b")
        rep.add(CONVERTED, "docker-compose.memory", f"{mem} -> environment.memory_mb = {out_mem}")
    fixed_image = image if isinstance(image, str) and "${" not in image else None
    return out_cpus, out_mem, fixed_image


def convert(path: Path) -> tuple[dict[str, Any], str, dict[str, Path | str], FieldReport, list[str]]:
    """A legacy task directory -> (task.toml mapping, instruction, {dest path: source file or text}, report, problems)."""
    rep = FieldReport()
    problems: list[str] = []
    try:
        data = yaml.safe_load((path / "task.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return {}, "", {}, rep, [f"cannot read task.yaml ({exc})"]
    except yaml.YAMLError as exc:
        return {}, "", {}, rep, [f"malformed task.yaml ({str(exc).splitlines()[0]})"]
    if not isinstance(data, dict):
        return {}, "", {}, rep, ["task.yaml is not a mapping"]
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        problems.append("task.yaml has no instruction")
        instruction = ""
    else:
        rep.add(CONVERTED, "instruction", "-> instruction.md")

    def seconds(key: str, default: float, target: str) -> float:
        value = data.get(key)
        if value is None:
            rep.add(DEFAULTED, key, f"absent: terminal-bench's default {default:g} -> {target}")
            return default
        try:
            v = float(value)
            if v <= 0:
                raise ValueError
        except (TypeError, ValueError):
            problems.append(f"{key} must be a positive number of seconds, got {value!r}")
            return default
        rep.add(CONVERTED, key, f"-> {target}")
        return v

    agent_timeout = seconds("max_agent_timeout_sec", TB_DEFAULT_AGENT_TIMEOUT, "agent.timeout_sec")
    test_timeout = seconds("max_test_timeout_sec", TB_DEFAULT_TEST_TIMEOUT, "verifier.timeout_sec")
    parser = data.get("parser_name", "pytest")
    if parser == "pytest":
        rep.add(CONVERTED, "parser_name", "pytest verdict -> exit status of run-tests.sh (same verdict)")
    else:
        problems.append(f"parser_name {parser!r}: only the pytest parser has an exit-status equivalent")
    metadata: dict[str, Any] = {"source_format": "terminal-bench task.yaml"}
    for key in _METADATA:
        if key in data and data[key] is not None:
            metadata[key] = data[key]
            rep.add(KEPT, key, "-> [metadata]")
    for key, value in data.items():
        if key in _HANDLED:
            continue
        if key not in _UNMAPPED_NOTES:  # a key terminal-bench's Task model does not have: a typo, not data
            problems.append(f"task.yaml: {key}: unknown key{did_you_mean(str(key), [*_HANDLED, *_UNMAPPED_NOTES])}")
            continue
        if value is not None:
            metadata[key] = value
        rep.add(UNMAPPED, key, _UNMAPPED_NOTES[key])

    cpus = memory = image = None
    compose_path = next((path / n for n in ("docker-compose.yaml", "docker-compose.yml") if (path / n).is_file()), None)
    if compose_path is not None:
        try:
            cpus, memory, image = _compose_resources(
                yaml.safe_load(compose_path.read_text(encoding="utf-8")) or {}, rep
            )
        except (yaml.YAMLError, OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
            problems.append(f"{compose_path.name}: {exc}")
    environment: dict[str, Any] = {
        "cpus": cpus if cpus is not None else HARBOR_DEFAULTS["cpus"],
        "memory_mb": memory if memory is not None else HARBOR_DEFAULTS["memory_mb"],
    }
    if cpus is None:
        rep.add(DEFAULTED, "environment.cpus", f"docker-compose gives none: Harbor's default {HARBOR_DEFAULTS['cpus']}")
    if memory is None:
        rep.add(
            DEFAULTED,
            "environment.memory_mb",
            f"docker-compose gives none: Harbor's default {HARBOR_DEFAULTS['memory_mb']}",
        )
    if image:
        environment["docker_image"] = image
        rep.add(CONVERTED, "docker-compose.image", f"-> environment.docker_image = {image}")

    files: dict[str, Path | str] = {"instruction.md": instruction, "tests/test.sh": TEST_SH}
    if (path / "run-tests.sh").is_file():
        files["tests/run-tests.sh"] = path / "run-tests.sh"
        rep.add(CONVERTED, "run-tests.sh", "-> tests/run-tests.sh, called by tests/test.sh")
    elif (path / "tests" / "test_outputs.py").is_file():
        files["tests/run-tests.sh"] = DEFAULT_RUN_TESTS
        rep.add(
            DEFAULTED,
            "run-tests.sh",
            "absent: terminal-bench's default runner (pytest on tests/test_outputs.py), written as tests/run-tests.sh",
        )
    else:
        problems.append(
            "run-tests.sh is missing, and there is no tests/test_outputs.py for terminal-bench's default runner"
        )
    if (path / "solution.sh").is_file():
        files["solution/solve.sh"] = path / "solution.sh"
        rep.add(CONVERTED, "solution.sh", "-> solution/solve.sh")
    elif (path / "solution.yaml").is_file():
        rep.add(
            UNMAPPED, "solution.yaml", "a keystroke oracle: copied to environment/, the oracle agent cannot replay it"
        )
    skip = {"task.yaml", "run-tests.sh", "solution.sh"}
    for f in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = f.relative_to(path).as_posix()
        if rel in skip:
            continue
        files[rel if rel.startswith("tests/") else f"environment/{rel}"] = f
    spec = {
        "version": "1.0",
        "metadata": metadata,
        "environment": environment,
        "agent": {"timeout_sec": agent_timeout},
        "verifier": {"timeout_sec": test_timeout},
    }
    return spec, instruction, files, rep, problems
