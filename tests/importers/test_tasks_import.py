"""``headroom tasks import|list|show|validate`` on Harbor tasks, a dataset manifest and legacy Terminal-Bench tasks.

The fixtures are written for these tests in the formats' shapes (Harbor task.toml 1.0 and 1.1,
dataset.toml, terminal-bench task.yaml + docker-compose.yaml).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.importers.taskset import read_task_set, write_task_set
from orchestrator.tasks.loader import load_task
from tests.cli_run import headroom

FIX = Path(__file__).parent / "fixtures"


def fields(summary: dict, kind: str) -> set[str]:
    return {f["field"] for f in summary["fields"][kind]}


def test_harbor_tasks_import_and_bad_ones_are_listed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = headroom("tasks", "import", str(FIX / "harbor_tasks"), "--out-dir", str(out), "--format", "json")
    assert res.returncode == 1  # some tasks were bad; the good ones are written anyway
    summary = json.loads(res.stdout)
    assert summary["tasks_ok"] == 3
    bad = {
        Path(b["path"]).name if Path(b["path"]).name != "task.toml" else Path(b["path"]).parent.name: b["reason"]
        for b in summary["bad"]
    }
    assert set(bad) == {"broken-toml", "no-agent-timeout", "typo-section"}
    assert "malformed TOML" in bad["broken-toml"] and "--agent-timeout" in bad["no-agent-timeout"]
    # a misspelt section is an error naming the key and the closest valid name, not a silent default
    assert "task.toml: enviroment: unknown key (did you mean 'environment'?)" in bad["typo-section"]
    assert fields(summary, "converted") == {"environment.memory", "environment.storage"}
    # Harbor's fields headroom does not use are listed as ignored, never dropped unseen
    assert {"environment.gpu_types", "environment.healthcheck"} <= fields(summary, "ignored")
    assert {
        "environment.gpus",
        "environment.allow_internet",
        "environment.env",
        "verifier.env",
        "solution.env",
        "task",
    } <= fields(summary, "kept")
    assert json.loads((out / "import-summary.json").read_text())["tasks_ok"] == 3
    # said at the import, not at the first sweep: the default local backend would refuse them
    refused = " ".join(summary["refused_on_local"])
    assert "fix-git (environment/Dockerfile)" in refused and "needs GPUs" in refused

    # A Harbor task runs without conversion: its task.toml is copied as written and headroom's loader reads it.
    assert (out / "fix-git" / "task.toml").read_text() == (FIX / "harbor_tasks/fix-git/task.toml").read_text()
    fix_git = load_task(out / "fix-git")
    assert (fix_git.spec.environment.memory_mb, fix_git.spec.environment.storage_mb) == (2048, 10240)
    model = load_task(out / "train-model").spec
    assert model.environment.gpus == 1 and model.environment.allow_internet is False
    assert model.environment.env == {"HF_HOME": "/cache/hf"} and model.verifier.env == {"EXPECTED_ACCURACY": "0.9"}
    assert model.solution.env == {"SEED": "7"}
    dumped = model.model_dump()
    assert dumped["environment"]["healthcheck"] == {"command": "test -f /app/ready"}  # ignored, not dropped
    # Without storage, Harbor's default (10240 MiB) and headroom's agree: the file stays as written.
    api = load_task(out / "serve-api").spec
    assert api.environment.storage_mb == 10240 and "storage" not in (out / "serve-api/task.toml").read_text()


def test_agent_timeout_default_makes_a_harbor_task_importable(tmp_path: Path) -> None:
    ts = read_task_set(FIX / "harbor_tasks" / "no-agent-timeout", agent_timeout=120)
    assert not ts.bad and ts.entries[0].spec["agent"]["timeout_sec"] == 120
    assert ("agent.timeout_sec", "absent: --agent-timeout 120") in ts.entries[0].report.by_kind("defaulted")
    write_task_set(ts, tmp_path)
    task = load_task(tmp_path / "no-agent-timeout")
    assert task.spec.agent.timeout_sec == 120 and task.spec.environment.memory_mb == 1024


def test_legacy_terminal_bench_tasks_are_converted(tmp_path: Path) -> None:
    ts = read_task_set(FIX / "tb_tasks")
    assert [b.reason for b in ts.bad] == [
        "task.yaml has no instruction; run-tests.sh is missing, and there is no "
        "tests/test_outputs.py for terminal-bench's default runner"
    ]
    written = write_task_set(ts, tmp_path)
    assert sorted(p.name for p in written) == ["big-build", "hello-world"]
    hello = load_task(tmp_path / "hello-world")
    assert (hello.spec.agent.timeout_sec, hello.spec.verifier.timeout_sec) == (900, 180)
    assert (hello.spec.environment.cpus, hello.spec.environment.memory_mb) == (1, 2048)  # compose gives none
    assert hello.instruction.startswith("Create a file called /app/hello.txt")
    assert hello.spec.metadata["difficulty"] == "easy" and hello.spec.metadata["expert_time_estimate_min"] == 1
    assert (tmp_path / "hello-world/solution/solve.sh").is_file()
    big = load_task(tmp_path / "big-build")
    assert (big.spec.environment.cpus, big.spec.environment.memory_mb) == (4, 8192)  # from docker-compose
    assert (tmp_path / "big-build/environment/task-deps/build.cfg").read_text() == "opt=3\n"
    summary = ts.summary()
    assert {"run_tests_in_same_shell", "solution.yaml", "docker-compose.services", "disable_asciinema"} <= fields(
        summary, "unmapped"
    )
    assert {"environment.cpus", "environment.memory_mb"} <= fields(summary, "defaulted")
    assert {"max_agent_timeout_sec", "max_test_timeout_sec", "docker-compose.memory"} <= fields(summary, "converted")


@pytest.mark.parametrize("exit_code, reward", [(0, "1"), (3, "0")])
def test_converted_verifier_rewards_by_the_exit_status_of_run_tests(
    tmp_path: Path, exit_code: int, reward: str
) -> None:
    src = tmp_path / "src" / "t"
    shutil.copytree(FIX / "tb_tasks/hello-world", src)
    (src / "run-tests.sh").write_text(f'#!/bin/bash\ntest -n "$TEST_DIR" || exit 9\nexit {exit_code}\n')
    ts = read_task_set(src)
    write_task_set(ts, tmp_path / "out")
    logs = tmp_path / "logs"
    subprocess.run(
        ["bash", str(tmp_path / "out/t/tests/test.sh")],
        check=True,
        timeout=30,
        env={**os.environ, "HEADROOM_LOGS_DIR": str(logs)},
    )
    assert (logs / "reward.txt").read_text().strip() == reward


def test_dataset_manifest_imports_in_one_call(tmp_path: Path) -> None:
    ts = read_task_set(FIX / "dataset" / "dataset.toml")
    assert [e.task_id for e in ts.entries] == ["serve-api", "fix-git"]  # the manifest's order
    assert ts.entries[0].dataset_digest == "sha256:" + "1" * 64
    assert [b.path for b in ts.bad] == ["example-org/not-downloaded"] and "not found" in ts.bad[0].reason
    assert ts.summary()["dataset"]["name"] == "example-org/mini-bench"
    assert ts.summary()["dataset_digests"] == {"serve-api": "sha256:" + "1" * 64, "fix-git": "sha256:" + "2" * 64}


def test_dataset_manifest_digests_are_kept_in_every_written_task(tmp_path: Path) -> None:
    """A task copied as written (fix-git loads as it is) keeps the manifest's digest too, beside every line it had."""
    ts = read_task_set(FIX / "dataset" / "dataset.toml")
    assert {e.task_id: e.verbatim for e in ts.entries}["fix-git"] is True
    write_task_set(ts, tmp_path / "out")
    for task, digit in (("serve-api", "1"), ("fix-git", "2")):
        assert load_task(tmp_path / "out" / task).spec.metadata["dataset_digest"] == "sha256:" + digit * 64
    original = (FIX / "dataset/tasks/fix-git/task.toml").read_text()
    written = (tmp_path / "out/fix-git/task.toml").read_text()
    assert all(line in written for line in original.splitlines())  # nothing else changed


def test_a_legacy_task_without_run_tests_gets_terminal_bench_s_default_runner(tmp_path: Path) -> None:
    """terminal-bench runs its default runner (pytest on tests/test_outputs.py) when a task has no run-tests.sh."""
    src = tmp_path / "src" / "t"
    shutil.copytree(FIX / "tb_tasks/hello-world", src)
    (src / "run-tests.sh").unlink()
    (src / "tests" / "test_outputs.py").write_text(
        "import os\n\ndef test_marker():\n    assert os.path.exists(os.environ['MARKER'])\n"
    )
    ts = read_task_set(src)
    assert not ts.bad and (
        "run-tests.sh",
        "absent: terminal-bench's default runner (pytest on tests/test_outputs.py), written as tests/run-tests.sh",
    ) in ts.entries[0].report.by_kind("defaulted")
    write_task_set(ts, tmp_path / "out")
    python_dir = str(Path(sys.executable).parent)  # a python3 with pytest, as the image would have
    for present, reward in ((True, "1"), (False, "0")):
        marker = tmp_path / "marker"
        marker.unlink(missing_ok=True)
        if present:
            marker.write_text("x")
        logs = tmp_path / f"logs-{reward}"
        subprocess.run(
            ["bash", str(tmp_path / "out/t/tests/test.sh")],
            check=True,
            timeout=120,
            env={
                **os.environ,
                "HEADROOM_LOGS_DIR": str(logs),
                "MARKER": str(marker),
                "PATH": python_dir + os.pathsep + os.environ["PATH"],
            },
        )
        assert (logs / "reward.txt").read_text().strip() == reward


def test_list_shows_distribution_and_tasks_above_a_size() -> None:
    res = headroom("tasks", "list", str(FIX / "harbor_tasks"), "--above-memory", "3G", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [t["task"] for t in doc["tasks"]] == ["serve-api", "train-model"]
    mem = doc["resources"]["memory_mb"]
    assert (mem["min"], mem["median"], mem["max"], mem["max_task"]) == (2048, 4096, 16384, "train-model")
    cpus = doc["resources"]["cpus"]
    assert (cpus["min"], cpus["median"], cpus["max"]) == (1, 2, 4)
    table = headroom("tasks", "list", str(FIX / "harbor_tasks"), "--above-cpus", "3")
    assert (
        table.returncode == 0
        and "train-model" in table.stdout
        and "serve-api" not in table.stdout.split("Resources")[0]
    )


def test_validate_and_show() -> None:
    bad = headroom("tasks", "validate", str(FIX / "tb_tasks"))
    assert bad.returncode == 1 and "no-instruction" in bad.stdout and "Traceback" not in bad.stderr
    good = headroom("tasks", "validate", str(FIX / "dataset" / "tasks"), "--backend", "docker")
    assert good.returncode == 0, good.stdout + good.stderr
    # the same tasks on the default (local) backend: their image would be ignored, so they are refused
    local = headroom("tasks", "validate", str(FIX / "dataset" / "tasks"))
    assert local.returncode == 1 and "container image: 2 tasks need their image" in " ".join(local.stdout.split())
    assert "do not run as they are" not in good.stdout  # Harbor's spellings ("2G") load as written
    show = headroom("tasks", "show", str(FIX / "tb_tasks"), "big-build", "--json")
    doc = json.loads(show.stdout)
    assert doc["format"] == "terminal-bench" and doc["spec"]["environment"]["memory_mb"] == 8192
    missing = headroom("tasks", "show", str(FIX / "tb_tasks"), "nope")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_validate_and_sweep_agree_on_a_task_that_leaves_its_resources_to_harbor_s_defaults(tmp_path: Path) -> None:
    task = tmp_path / "bare"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n[agent]\ntimeout_sec = 60\n')
    (task / "instruction.md").write_text("Say hi.\n")
    (task / "tests" / "test.sh").write_text('echo 1 > "$HEADROOM_LOGS_DIR/reward.txt"\n')
    check = headroom("tasks", "validate", str(task))
    assert check.returncode == 1, check.stdout  # not "valid": sweep would refuse it
    assert (
        "needs import bare: leaves environment.cpus, environment.memory_mb, environment.storage_mb, "
        "verifier.timeout_sec to Harbor's defaults" in " ".join(check.stdout.split())
    )
    run = headroom("sweep", str(task), "--attempts", "1", "--store", str(tmp_path / "h.db"), "--format", "none")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "environment: required field is missing" in run.stderr and "headroom tasks import" in run.stderr
    imported = headroom("tasks", "import", str(task), "--out-dir", str(tmp_path / "out"))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    again = headroom("tasks", "validate", str(tmp_path / "out"))
    assert again.returncode == 0, again.stdout  # the import wrote Harbor's defaults in: it runs as it is now
