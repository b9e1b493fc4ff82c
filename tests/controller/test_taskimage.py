"""Task sets as an image (`taskSource.image`), without a cluster: the spec's validation, the image
layout and catalog `headroom tasks image` writes, the controller's view of a catalog, and the trial
pod's init container, whose copy script runs here for real against a written build context."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from orchestrator.backends.kubernetes import scripts
from orchestrator.backends.kubernetes.pod import TASK_FILES_CONTAINER, build, copy_task_script
from orchestrator.cli import cli
from orchestrator.controller import taskimage
from orchestrator.controller.resources import ExperimentResourceSpec, TaskSource
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.errors import SpecError
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.tasks.files import AGENT_TOML_KEY, ImageTaskFiles, bundle
from orchestrator.tasks.image import tests_manifest_of as manifest_of  # (a `test*` name pytest would collect)
from orchestrator.tasks.image import write_context
from orchestrator.tasks.loader import load_tasks

REPO = Path(__file__).resolve().parents[2]
TASKS = ["word-index", "csv-report"]


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    src = tmp_path_factory.mktemp("src")
    for t in TASKS:  # a task set of two bundled tasks
        subprocess.run(["cp", "-a", str(REPO / "tasks" / t), str(src / t)], check=True)
    out = tmp_path_factory.mktemp("ctx") / "context"
    return out, write_context(src, out, "headroom.local/debian-base:test")


def test_a_task_source_is_exactly_one_of_bundle_or_image() -> None:
    assert TaskSource(image="headroom.local/tasks:1").key == "image:headroom.local/tasks:1"
    assert TaskSource(bundle="headroom-tasks-abc").key == "bundle:headroom-tasks-abc"
    for bad in ({}, {"bundle": "a", "image": "b"}, {"image": "has space"}, {"path": "/host"}):
        with pytest.raises(ValidationError):
            TaskSource.model_validate(bad)
    spec = ExperimentResourceSpec.model_validate({"task_source": {"image": "r/tasks:1"}, "image": "x"})
    assert spec.model_dump(mode="json")["task_source"] == {"image": "r/tasks:1"}  # no `bundle: null`


def test_the_build_context_holds_each_task_and_a_catalog_matching_the_loader(context: tuple[Path, dict]) -> None:
    out, cat = context
    assert (out / "Dockerfile").read_text().startswith("FROM headroom.local/debian-base:test\n")
    on_disk = json.loads((out / "headroom-tasks" / "catalog.json").read_text())
    assert on_disk == cat and sorted(cat["tasks"]) == sorted(TASKS)
    for t in load_tasks(REPO / "tasks", TASKS):
        entry = cat["tasks"][t.id]
        assert entry["digest"] == t.digest  # the digest a local run of the same folder records
        assert entry["tests_manifest"] == bundle(t.id, t.path, t.digest).tests_manifest()
        assert entry["instruction"] == t.instruction and entry["has_tests"]
        for rel in entry["files"]:
            copied, orig = out / "headroom-tasks" / t.id / rel, Path(t.path) / rel
            assert copied.read_bytes() == orig.read_bytes()
            assert copied.stat().st_mode & 0o004  # world-readable: trial pods copy as a non-root uid
            assert bool(copied.stat().st_mode & 0o111) == os.access(orig, os.X_OK)
    with pytest.raises(SpecError, match="not empty"):
        write_context(REPO / "tasks", out, "b")


def test_the_cli_writes_a_context(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        cli,
        [
            "tasks",
            "image",
            str(REPO / "tasks"),
            "--tag",
            "t/tasks:1",
            "--base",
            "b:1",
            "--build-dir",
            str(tmp_path / "ctx"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ctx" / "headroom-tasks" / "word-index" / "tests" / "test.sh").is_file()


def test_the_controller_plans_from_the_catalog_alone(context: tuple[Path, dict], tmp_path: Path) -> None:
    _, cat = context
    tasks, root = taskimage.load_set(cat, "r/tasks:1", tmp_path, ["word-*"])
    assert [t.id for t in tasks] == ["word-index"]
    (local,) = load_tasks(REPO / "tasks", ["word-index"])
    assert tasks[0].digest == local.digest and tasks[0].spec == local.spec
    assert manifest_of(tasks[0].path) == cat["tasks"]["word-index"]["tests_manifest"]
    with pytest.raises(SpecError, match="no task matches"):
        taskimage.load_set(cat, "r/tasks:1", tmp_path, ["nope"])
    with pytest.raises(SpecError, match="no headroom task catalog"):
        taskimage.parse("bash: cat: No such file", "r/other:1")


def test_the_catalog_pod_is_restricted_and_named_by_the_reference() -> None:
    opts = KubernetesOptions(node_selector={"pool": "a"}, image_pull_policy="Never")
    body = taskimage.catalog_pod("r/tasks:1", opts)
    assert body["metadata"]["name"] == taskimage.catalog_name("r/tasks:1") != taskimage.catalog_name("r/tasks:2")
    spec = body["spec"]
    (c,) = spec["containers"]
    assert spec["automountServiceAccountToken"] is False and spec["nodeSelector"] == {"pool": "a"}
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["seccompProfile"]
    assert c["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["imagePullPolicy"] == "Never" and c["command"] == ["cat", "/headroom-tasks/catalog.json"]


def _image_pod(oracle: bool) -> tuple[dict, dict]:
    exp = Experiment(
        tasks_dir=str(REPO / "tasks"),
        tasks=["word-index"],
        configurations=["1x-strict"],
        attempts=1,
        agent={"kind": "oracle"} if oracle else {"command": "true"},
    )
    tasks = load_tasks(REPO / "tasks", ["word-index"])
    launch = build_launch("run-p", plan(exp, tasks)[0], 0, tasks[0], exp)
    b = bundle("word-index", tasks[0].path, tasks[0].digest)
    files = ImageTaskFiles("word-index", "r/tasks:1", b.tests_manifest())
    opts = KubernetesOptions(image_pull_policy="Never")
    return build(launch, opts, files, "img:1"), build(launch, opts, b, "img:1")


@pytest.mark.parametrize("oracle", [False, True])
def test_an_image_delivered_pod_has_the_same_mounts_with_an_init_container(oracle: bool) -> None:
    pod, cm_pod = _image_pod(oracle)
    init, agent = pod["spec"]["initContainers"]  # the task files first, then the agent's container
    assert agent["name"] == "agent" and agent == cm_pod["spec"]["initContainers"][-1]
    assert init["name"] == TASK_FILES_CONTAINER and init["image"] == "r/tasks:1" and init["imagePullPolicy"] == "Never"
    sc = init["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert init["resources"]["requests"] == init["resources"]["limits"]  # keeps a Guaranteed pod Guaranteed
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    # no task file comes from a ConfigMap: the only one mounted is the runner's and warden's scripts
    assert [n for n, v in vols.items() if "configMap" in v] == [scripts.VOLUME]
    want = {"task", "tests-src", *(["solution"] if oracle else [])}
    assert {m["name"] for m in init["volumeMounts"]} == want and all("emptyDir" in vols[n] for n in want)
    # the containers see exactly what they see with a ConfigMap bundle
    assert pod["spec"]["containers"] == cm_pod["spec"]["containers"]
    assert sorted(vols) == sorted(v["name"] for v in cm_pod["spec"]["volumes"])
    assert [c["name"] for c in cm_pod["spec"]["initContainers"]] == ["agent"]


def _tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), os.access(p, os.X_OK)) for p in root.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("oracle", [False, True])
def test_the_init_script_lays_out_the_files_a_configmap_bundle_would(
    context: tuple[Path, dict], tmp_path: Path, oracle: bool
) -> None:
    out, _ = context
    fill = tmp_path / "fill"
    for n in ("task", "tests-src", "solution"):
        (fill / n).mkdir(parents=True)
    script = copy_task_script("word-index", str(out / "headroom-tasks"), oracle, str(fill))
    subprocess.run(["sh", "-c", script], check=True)
    (t,) = load_tasks(REPO / "tasks", ["word-index"])
    b = bundle(t.id, t.path, t.digest)
    by_key = {f.key: f.data for f in b.files} | {AGENT_TOML_KEY: b.agent_toml()}  # task.toml: the agent's view

    def expected(items: list[dict]) -> dict[str, tuple[bytes, bool]]:
        return {i["path"]: (by_key[i["key"]], i["mode"] == 0o755) for i in items}

    task_items = b.items("") + (b.items("solution") if oracle else [])
    assert _tree(fill / "task") == expected(task_items)
    assert _tree(fill / "tests-src") == expected(b.items("tests", strip=True))
    assert _tree(fill / "solution") == (expected(b.items("solution", strip=True)) if oracle else {})
