"""Variants of each class of issue 30 item 1, held against every backend's declaration: how a task says it needs
an image (docker_image, environment/Dockerfile, both), GPUs (0 or absent vs some), the internet (allow_internet, or
Harbor 0.25's network_mode/allowed_hosts for the whole environment, the verifier or the agent), and Harbor's os and
tpu fields, which no headroom backend can give. Each is refused where it cannot run faithfully, and nowhere else.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from orchestrator.backends.kubernetes.pod import build
from orchestrator.engine import faithful
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.errors import SpecError
from orchestrator.importers.harbor_task import normalize
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.tasks.files import bundle
from orchestrator.tasks.loader import load_tasks
from tests.taskfactory import write_task

BACKENDS = ("local", "docker", "kubernetes")
CURL = "curl -fsSL https://example.org/x -o x\n"


def _task(
    root: Path, name: str, env: str = "", sections: str = "", test: str = "true\n", solve: str = "true\n"
) -> Path:
    d = write_task(root, name, solve=solve, test=test)
    toml = d / "task.toml"
    text = toml.read_text().replace("[agent]\n", f"{env}\n[agent]\n")
    for section, line in (s.split(":", 1) for s in sections.split(";") if s):
        text = text.replace(f"[{section}]\n", f"[{section}]\n{line}\n")
    toml.write_text(text)
    return d


def _classes(root: Path, backend: str, *, env_network: bool = False, oracle_network: bool = False) -> list[str]:
    got = faithful.check_tasks(
        load_tasks(root), faithful.Profile.declared(backend), env_network=env_network, oracle_network=oracle_network
    )
    return [ln.split(":")[0] for ln in got.lines]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_way_to_name_an_image_is_an_image_and_none_is_none(backend: str, tmp_path: Path) -> None:
    for name, env in (("image", 'docker_image = "python:3.11-slim"'), ("both", 'docker_image = "python:3.11-slim"')):
        _task(tmp_path / name, name, env)
    _task(tmp_path / "dockerfile", "dockerfile")
    for name in ("dockerfile", "both"):
        (tmp_path / name / name / "environment").mkdir()
        (tmp_path / name / name / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    _task(tmp_path / "none", "none")
    image_refused = backend == "local"
    for name in ("image", "dockerfile", "both"):
        assert _classes(tmp_path / name, backend) == (["container image"] if image_refused else []), (backend, name)
    assert _classes(tmp_path / "none", backend) == []  # no image: its scripts run where they are
    # the author says its scripts need nothing from the image
    _task(tmp_path / "portable", "portable", 'docker_image = "python:3.11-slim"\nruns_on_host = true')
    assert _classes(tmp_path / "portable", backend) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpus_zero_or_absent_need_nothing_and_any_other_count_is_refused(backend: str, tmp_path: Path) -> None:
    _task(tmp_path / "absent", "absent")
    _task(tmp_path / "zero", "zero", "gpus = 0")
    _task(tmp_path / "zero-typed", "zero-typed", 'gpus = 0\ngpu_types = ["H100"]')
    _task(tmp_path / "two", "two", 'gpus = 2\ngpu_types = ["H100"]')
    for name in ("absent", "zero", "zero-typed"):
        assert _classes(tmp_path / name, backend) == []
    line = faithful.check_tasks(load_tasks(tmp_path / "two"), faithful.Profile.declared(backend)).lines[0]
    assert line.startswith(f"GPUs: 1 task needs GPUs, which the {backend} backend cannot give: two (2 GPU(s))")


@pytest.mark.parametrize("backend", BACKENDS)
def test_harbor_network_mode_is_read_like_allow_internet(backend: str, tmp_path: Path) -> None:
    _task(tmp_path / "public", "public", 'network_mode = "public"')
    _task(tmp_path / "allowlist", "allowlist", 'network_mode = "allowlist"\nallowed_hosts = ["pypi.org"]')
    _task(tmp_path / "offline", "offline", 'network_mode = "no-network"', test=CURL)  # a promise: not read
    _task(tmp_path / "offline-case", "offline-case", 'network_mode = "No-Network"', test=CURL)
    for name in ("public", "allowlist"):
        assert _classes(tmp_path / name, backend) == ["network"], name
        assert _classes(tmp_path / name, backend, env_network=True) == []
    for name in ("offline", "offline-case"):
        assert _classes(tmp_path / name, backend) == []
    line = faithful.check_tasks(load_tasks(tmp_path / "allowlist"), faithful.Profile.declared(backend)).lines[0]
    assert "allowlist (network_mode = allowlist (pypi.org))" in line


def test_network_mode_of_one_phase_applies_to_that_phase(tmp_path: Path) -> None:
    docker = "docker"
    _task(tmp_path / "v", "v", sections='verifier:network_mode = "public"')
    assert _classes(tmp_path / "v", docker) == ["network"]
    # the verifier says it runs offline: its curl is not a need
    _task(tmp_path / "vo", "vo", sections='verifier:network_mode = "no-network"', test=CURL)
    assert _classes(tmp_path / "vo", docker) == []
    # the agent phase: a need of the oracle (solve.sh), met when the oracle's network is allowed
    _task(tmp_path / "a", "a", sections='agent:network_mode = "public"')
    assert _classes(tmp_path / "a", docker) == ["network"]
    assert _classes(tmp_path / "a", docker, oracle_network=True) == []
    line = faithful.check_tasks(load_tasks(tmp_path / "a"), faithful.Profile.declared(docker)).lines[0]
    assert "a ([agent] network_mode = public)" in line
    _task(tmp_path / "ao", "ao", sections='agent:network_mode = "no-network"', solve=CURL)
    assert _classes(tmp_path / "ao", docker) == []


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ('network_mode = "bridge"', "network_mode must be one of no-network, public, allowlist"),
        ('network_mode = "public"\nallowed_hosts = ["x.org"]', "allowed_hosts is only valid with"),
        ('allow_internet = true\nnetwork_mode = "no-network"', "contradicts network_mode"),
        ('os = "macos"', "environment.os must be one of linux, windows"),
        ('tpu = "v6e"', "environment.tpu must be a table"),
    ],
)
def test_a_harbor_need_field_harbor_would_refuse_is_refused(tmp_path: Path, env: str, words: str) -> None:
    _task(tmp_path, "t", env)
    with pytest.raises(SpecError, match=words):
        load_tasks(tmp_path)


@pytest.mark.parametrize("backend", BACKENDS)
def test_windows_containers_and_tpus_are_refused_by_every_backend(backend: str, tmp_path: Path) -> None:
    _task(tmp_path / "win", "win", 'os = "windows"')
    _task(tmp_path / "linux", "linux", 'os = "Linux"')
    _task(tmp_path / "tpu", "tpu", "tpu = { type = 'v6e', topology = '2x4' }")
    assert _classes(tmp_path / "linux", backend) == []
    (win,) = faithful.check_tasks(load_tasks(tmp_path / "win"), faithful.Profile.declared(backend)).lines
    assert win.startswith("operating system: 1 task needs windows containers") and "win (os = windows)" in win
    (tpu,) = faithful.check_tasks(load_tasks(tmp_path / "tpu"), faithful.Profile.declared(backend)).lines
    assert tpu.startswith("TPUs: 1 task needs a TPU slice, which no headroom backend gives") and "v6e 2x4" in tpu


def test_import_lists_the_fields_read_as_needs_as_kept_never_as_problems(tmp_path: Path) -> None:
    d = _task(
        tmp_path,
        "t",
        'network_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\nos = "linux"',
        sections='verifier:network_mode = "no-network";agent:network_mode = "public"',
    )
    raw = tomllib.loads((d / "task.toml").read_text())
    _, rep, problems = normalize(raw)
    assert problems == []
    kept = dict(rep.by_kind("kept"))
    for field in ("environment.network_mode", "environment.allowed_hosts", "environment.os"):
        assert "read as a need" in kept[field] or "needs the network" in kept[field], field
    assert "verifier.network_mode" in kept and "agent.network_mode" in kept
    assert not [f for f, _ in rep.by_kind("ignored") if "network" in f or f.endswith(".os")]


def test_a_task_built_for_one_cpu_is_pinned_to_nodes_of_it(tmp_path: Path) -> None:
    for name, platform in (("arm", "linux/arm64/v8"), ("any", "$BUILDPLATFORM")):
        d = _task(tmp_path, name, 'docker_image = "python:3.11-slim"')
        (d / "environment").mkdir()
        (d / "environment" / "Dockerfile").write_text(f"FROM --platform={platform} python:3.11-slim\n")
    exp = Experiment(tasks_dir=str(tmp_path), configurations=["unbounded"], attempts=1)
    opts = KubernetesOptions(node_selector={"pool": "eval"})
    selectors = {}
    for task in load_tasks(tmp_path):
        launch = build_launch("run-p", plan(exp, [task])[0], 0, task, exp)
        pod = build(launch, opts, bundle(task.id, task.path, task.digest), "img:1")
        selectors[task.id] = pod["spec"]["nodeSelector"]
    assert selectors == {"arm": {"pool": "eval", "kubernetes.io/arch": "arm64"}, "any": {"pool": "eval"}}


def test_a_no_network_task_gets_no_network_whatever_the_sweep_allows(tmp_path: Path) -> None:
    """Harbor's network_mode = "no-network" is kept as allow_internet = false is: a promise and a cut."""
    _task(tmp_path, "off", 'network_mode = "no-network"')
    _task(tmp_path, "said", "allow_internet = false")
    _task(tmp_path, "on", 'network_mode = "public"')
    exp = Experiment(tasks_dir=str(tmp_path), configurations=["unbounded"], attempts=1, allow_internet=True)
    got = {t.id: build_launch("r", plan(exp, [t])[0], 0, t, exp).allow_internet for t in load_tasks(tmp_path)}
    assert got == {"off": False, "said": False, "on": True}


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_a_task_s_compose_file_asks_for_is_a_need_too(backend: str, tmp_path: Path) -> None:
    """A task whose only image is its compose service's, or that reserves a GPU the way Docker Compose does."""
    compose = {
        "image": "services:\n  main:\n    image: python:3.11-slim\n",
        "build": "services:\n  main:\n    build: .\n",
        "variable": "services:\n  main:\n    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}\n",
        "gpu": "services:\n  main:\n    image: python:3.11-slim\n    deploy:\n      resources:\n        reservations:\n"
        "          devices:\n            - driver: nvidia\n              count: 1\n              capabilities: [gpu]\n",
        "nvidia": "services:\n  main:\n    runtime: nvidia\n",
    }
    for name, text in compose.items():
        d = _task(tmp_path / name, name)
        (d / "environment").mkdir()
        (d / "environment" / "docker-compose.yaml").write_text(text)
    image = ["container image"] if backend == "local" else []
    assert _classes(tmp_path / "image", backend) == image
    assert _classes(tmp_path / "build", backend) == image
    assert _classes(tmp_path / "variable", backend) == []  # the image is whatever the harness sets: not a name
    assert _classes(tmp_path / "gpu", backend) == [*image, "GPUs"]
    assert _classes(tmp_path / "nvidia", backend) == ["GPUs"]
    line = faithful.check_tasks(load_tasks(tmp_path / "gpu"), faithful.Profile.declared(backend)).lines[-1]
    assert "gpu (environment/docker-compose.yaml: main reserves a GPU)" in line


def test_tasks_validate_says_where_the_architecture_was_not_checked() -> None:
    """Without connecting, a daemon's or a cluster's CPUs are not known: validate says so instead of passing
    the task in silence; on local (this host's CPUs) it is refused as a sweep would."""
    import json

    from tests.cli_run import headroom

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "faithful" / "other-arch"

    def validate(backend: str) -> dict[str, object]:
        proc = headroom("tasks", "validate", str(fix), "--backend", backend, "--json", timeout=120)
        doc: dict[str, object] = json.loads(proc.stdout)
        return doc

    for backend in ("docker", "kubernetes"):
        assert validate(backend)["architecture_unchecked"] == {"other-arch": "s390x"}
    local = validate("local")
    assert local["architecture_unchecked"] == {}
    assert any(str(ln).startswith("CPU architecture:") for ln in local["refused"])  # type: ignore[attr-defined]


def test_the_controller_sees_the_needs_of_a_task_set_image_s_files_through_its_catalog(tmp_path: Path) -> None:
    """A task-set image's catalog holds task.toml but not the Dockerfile, compose file or scripts the needs are
    read from: the catalog records them when the image is built, and the controller refuses from those."""
    from orchestrator.controller import taskimage
    from orchestrator.controller.resources import ExperimentResourceSpec
    from orchestrator.tasks.image import catalog

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "faithful"
    cat = catalog(load_tasks(fix))
    spec = ExperimentResourceSpec.model_validate({"name": "e", "task_source": {"image": "tasks:1"}, "image": "x:1"})

    def refused(c: dict[str, object], scratch: Path, archs: tuple[str, ...] = ()) -> list[str]:
        tasks, root = taskimage.load_set(c, "tasks:1", scratch)
        exp = spec.model_copy(update={"tasks_dir": str(root)})
        message = faithful.controller_refusal(exp, tasks, architectures=archs) or ""
        return [part.split(":")[0] for part in message.split(": ", 1)[-1].split(" | ") if part]

    from_files = faithful.controller_refusal(
        spec.model_copy(update={"tasks_dir": str(fix)}), load_tasks(fix), architectures=("amd64",)
    )
    assert from_files is not None
    assert refused(cat, tmp_path / "a", ("amd64",)) == ["multi-container", "GPUs", "CPU architecture", "network"]
    assert from_files.split(": ", 1)[1].count(" | ") == 3
    # a catalog from before the needs were recorded: task.toml's alone (the GPU)
    old = {**cat, "tasks": {k: {f: v for f, v in e.items() if f != "needs"} for k, e in cat["tasks"].items()}}
    assert refused(old, tmp_path / "b", ("amd64",)) == ["GPUs"]
