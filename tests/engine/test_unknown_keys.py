"""Unknown keys are errors naming the file, the key and the closest valid name (issue 30, item 2).

Measured on main before this: a task.toml with ``[enviroment]`` validated as "valid" and the sweep then ran
the 2,048 MiB default instead of the 128 MiB the user wrote. Task files, experiment files and ``--map`` are
covered; Harbor fields headroom does not use are listed as ignored instead.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import SpecError
from orchestrator.tasks.loader import load_task
from tests.cli_run import headroom
from tests.taskfactory import write_task

REPO = Path(__file__).resolve().parents[2]
HARBOR_JOB = REPO / "tests" / "importers" / "fixtures" / "harbor_job"


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "old, new, field, guess",
    [
        ("[environment]", "[enviroment]", "enviroment", "environment"),
        ("cpus = 1", "cpu = 1", "environment.cpu", "cpus"),
        ("memory_mb = 64", "memory_mib = 64", "environment.memory_mib", "memory_mb"),
        ("[verifier]\ntimeout_sec", "[verifier]\ntimout_sec", "verifier.timout_sec", "timeout_sec"),
        ('source = "headroom test suite"', 'sourse = "headroom test suite"', "provenance.sourse", "source"),
    ],
)
def test_a_misspelt_task_key_is_refused_with_the_closest_name(
    tmp_path: Path, old: str, new: str, field: str, guess: str
) -> None:
    d = write_task(tmp_path / "tasks", "t", solve="true\n")
    toml = d / "task.toml"
    assert old in toml.read_text()
    toml.write_text(toml.read_text().replace(old, new))
    with pytest.raises(SpecError) as exc:
        load_task(d)
    assert exc.value.file == str(toml) and exc.value.field == field
    assert f"did you mean {guess!r}" in exc.value.message
    line = one_line_error(headroom("sweep", str(tmp_path / "tasks"), "--store", str(tmp_path / "h.db")))
    assert str(toml) in line and field in line and f"did you mean {guess!r}" in line
    assert not (tmp_path / "h.db").exists()
    check = headroom("tasks", "validate", str(tmp_path / "tasks"))
    assert check.returncode == 1 and f"did you mean {guess!r}" in " ".join(check.stdout.split())


def test_harbor_fields_headroom_does_not_use_are_listed_as_ignored(tmp_path: Path) -> None:
    d = write_task(tmp_path / "tasks", "t", solve="true\n")
    toml = d / "task.toml"
    text = toml.read_text().replace("[agent]", 'gpu_types = ["H100"]\n[agent]\nuser = "agent"')
    toml.write_text(text + '\n[task]\nname = "org/t"\n')
    spec = load_task(d).spec
    assert spec.environment.model_extra == {"gpu_types": ["H100"]} and spec.agent.model_extra == {"user": "agent"}
    shown = headroom("tasks", "validate", str(tmp_path / "tasks"))
    assert shown.returncode == 0, shown.stdout
    rows = [" ".join(ln.split()) for ln in shown.stdout.splitlines() if "ignored" in ln]
    assert any("environment.gpu_types" in r for r in rows) and any("agent.user" in r for r in rows), shown.stdout


def test_a_legacy_terminal_bench_key_no_version_has_is_refused(tmp_path: Path) -> None:
    src = REPO / "tests" / "importers" / "fixtures" / "tb_tasks" / "hello-world"
    d = tmp_path / "hello-world"
    subprocess.run(["cp", "-r", str(src), str(d)], check=True)
    yml = d / "task.yaml"
    yml.write_text(yml.read_text().replace("max_agent_timeout_sec", "max_agent_timout_sec"))
    proc = headroom("tasks", "validate", str(d))
    assert proc.returncode == 1
    assert "max_agent_timout_sec: unknown key (did you mean 'max_agent_timeout_sec'?)" in " ".join(proc.stdout.split())


@pytest.mark.parametrize(
    "text, field, guess",
    [
        ("atempts: 2\n", "atempts", "attempts"),
        ("agent: {comand: 'true'}\n", "agent.comand", "command"),
        ("retry: {max_retry: 2}\n", "retry.max_retry", "max_retries"),
    ],
)
def test_a_misspelt_experiment_key_is_refused_with_the_closest_name(
    tmp_path: Path, text: str, field: str, guess: str
) -> None:
    write_task(tmp_path / "tasks", "t", solve="true\n")
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"tasks_dir: tasks\n{text}")
    line = one_line_error(headroom("sweep", "--experiment", str(exp), "--store", str(tmp_path / "h.db")))
    assert str(exp) in line and field in line and f"did you mean {guess!r}" in line


def test_a_map_type_that_would_map_nothing_is_refused(tmp_path: Path) -> None:
    store = str(tmp_path / "h.db")
    line = one_line_error(
        headroom("results", "import", str(HARBOR_JOB), "--store", store, "--map", "AgentTimoutError=timeout")
    )
    assert "--map" in line and "did you mean 'AgentTimeoutError'" in line
    assert not Path(store).exists()
    line = one_line_error(
        headroom("results", "import", str(HARBOR_JOB), "--store", store, "--map", "AgentTimeoutError=infra_eror")
    )
    assert "did you mean 'infra_error'" in line
    # a type the sources record but no table knows (the reason --map exists) is accepted
    ok = headroom(
        "results",
        "import",
        str(HARBOR_JOB),
        "--store",
        store,
        "--map",
        "SandboxQuotaExceededError=infra_error:api_error",
    )
    assert ok.returncode == 0, ok.stderr


def test_a_spec_an_older_headroom_recorded_still_reads() -> None:
    """Stores keep each task's spec as loaded; a key older versions kept verbatim is history, not input."""
    from pydantic import ValidationError

    from orchestrator.spec.task import TaskSpec
    from orchestrator.spec.unknown import RECORDED

    old = (
        '{"environment": {"cpus": 1, "memory_mb": 64, "network_mode": "bridge2"}, "agent": {"timeout_sec": 5},'
        ' "verifier": {"timeout_sec": 5}, "custom_grading": {"rubric": "r.md"}}'
    )
    with pytest.raises(ValidationError):
        TaskSpec.model_validate_json(old)
    spec = TaskSpec.model_validate_json(old, context={RECORDED: True})
    assert spec.model_extra == {"custom_grading": {"rubric": "r.md"}}
