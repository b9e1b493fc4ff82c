"""What a container backend carries from the agent's environment to the verifier's (orchestrator/contract/carry.py),
and the task field that declares more of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.contract import carry
from orchestrator.errors import SpecError
from orchestrator.tasks.loader import load_task


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/usr",
        "/usr/local/lib/python3.11/dist-packages",
        "/etc/python3.11",
        "/bin",
        "/lib64",
        "/logs",
        "/logs/verifier",
        "/tests",
        "/headroom/run",
        "/solution",
        "relative/out",
        "/srv/../usr",
        "/srv/out/",
        "//srv",
    ],
)
def test_the_system_and_headroom_s_own_paths_are_never_carried(path: str) -> None:
    assert carry.problem(path) is not None


@pytest.mark.parametrize("path", ["/app", "/srv/out", "/root", "/var/lib/postgresql", "/opt/answer"])
def test_an_output_folder_may_be_carried(path: str) -> None:
    assert carry.problem(path) is None


def test_the_work_dir_of_an_image_without_one_is_app_and_nested_outputs_go_with_their_parent() -> None:
    assert carry.workdir("") == carry.workdir("/") == "/app"
    assert carry.workdir("/srv/work") == "/srv/work"
    assert carry.roots("/app", ["/app/data", "/srv", "/srv/x"]) == ["/app", "/logs/agent", "/srv"]
    assert carry.roots("/srv/app", ["/srv"]) == ["/logs/agent", "/srv"]  # the work dir inside a declared output


def _task(root: Path, outputs: str) -> Path:
    d = root / "t"
    (d / "tests").mkdir(parents=True)
    (d / "instruction.md").write_text("x\n")
    (d / "tests" / "test.sh").write_text("true\n")
    (d / "task.toml").write_text(
        "[environment]\ncpus = 1\nmemory_mb = 64\n[agent]\ntimeout_sec = 5\n"
        f"[verifier]\ntimeout_sec = 5\noutputs = {outputs}\n"
    )
    return d


def test_a_task_declares_its_outputs_and_a_system_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    assert load_task(_task(tmp_path / "a", '["/srv/out"]')).spec.verifier.outputs == ["/srv/out"]
    assert carry.declared(b'[verifier]\noutputs = ["/srv/out"]\n') == ["/srv/out"]
    with pytest.raises(SpecError) as err:
        load_task(_task(tmp_path / "b", '["/usr/local/lib"]'))
    assert "system folder /usr" in str(err.value) and "\n" not in str(err.value)


def test_components_are_each_folder_on_the_way_then_the_path() -> None:
    """What the Docker backend's link check stats and its hand-over creates, in order."""
    assert carry.components("/a/b/c") == ["/a", "/a/b", "/a/b/c"]
    assert carry.components("/headroom/run/") == ["/headroom", "/headroom/run"]
    assert carry.components("/") == []
