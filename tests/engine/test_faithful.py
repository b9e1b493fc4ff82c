"""A task the backend cannot run faithfully is refused before the sweep, one line per class (issue 30, item 1).

The tasks are written in the Terminal-Bench 2 / Harbor layout (tests/fixtures/faithful): a task naming its
image (as fix-git does), one with environment/Dockerfile, one needing a GPU, one whose verifier installs uv and
pytest from the internet, a multi-container one (docker-compose with a database), one for another CPU.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.engine import faithful
from orchestrator.spec.backend import BackendAbilities
from orchestrator.store.sqlite import Store
from orchestrator.tasks.loader import load_tasks
from orchestrator.tasks.needs import host_arch
from tests.cli_run import headroom
from tests.taskfactory import requires_cgroups, write_task

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "faithful"
CLASSES = ("container image:", "multi-container:", "GPUs:", "CPU architecture:", "network:")


def refusal_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The refusal: 'error: refused ...' then one indented line per class (the backend's announcement before)."""
    lines = proc.stderr.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("error: refused before anything ran"))
    return [ln.strip() for ln in lines[start + 1 :] if ln.strip()]


def test_a_sweep_on_local_refuses_every_class_in_one_line_each_and_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "out" / "h.db"
    proc = headroom("sweep", str(FIX), "--store", str(store), "--attempts", "1", "--no-canary")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = refusal_lines(proc)
    assert [next(c for c in CLASSES if ln.startswith(c)) for ln in lines] == list(CLASSES)
    image, compose, gpus, arch, network = lines
    # which tasks, what they need, what can run them
    for task in ("needs-image", "needs-dockerfile", "multi-container", "other-arch"):
        assert task in image
    assert "docker_image headroom.local/tb2-fix-git:20251031" in image and "environment/Dockerfile" in image
    assert "--backend kubernetes or docker" in image and "--run-on-host" in image
    assert "needs-gpu (1 GPU(s))" in gpus and "no headroom backend gives GPUs" in gpus
    assert "services main, db" in compose
    assert "s390x" in arch and host_arch() in arch and "other-arch" in arch
    assert "needs-internet (tests/test.sh: apt-get update)" in network and "--allow-internet" in network
    assert "needs-image" not in network  # allow_internet = false: the author says it runs offline
    assert not store.exists() and not store.parent.exists()


def test_tasks_validate_says_the_same_per_backend() -> None:
    local = headroom("tasks", "validate", str(FIX), "--json")
    assert local.returncode == 1
    doc = json.loads(local.stdout)
    assert doc["backend"] == "local" and not doc["runs_as_is"]
    assert [next(c for c in CLASSES if ln.startswith(c)) for ln in doc["refused"]] == list(CLASSES)
    # a container backend runs images and Dockerfiles; with the network allowed only GPUs and compose remain
    docker = json.loads(
        headroom("tasks", "validate", str(FIX), "--backend", "docker", "--allow-internet", "--json").stdout
    )
    assert [ln.split(":")[0] for ln in docker["refused"]] == ["multi-container", "GPUs"]
    text = headroom("tasks", "validate", str(FIX / "needs-image"), "--backend", "kubernetes")
    assert text.returncode == 0, text.stdout


def test_each_class_alone(tmp_path: Path) -> None:
    for task, cls in (
        ("needs-image", "container image:"),
        ("needs-dockerfile", "container image:"),
        ("needs-gpu", "GPUs:"),
        ("needs-internet", "network:"),
    ):
        proc = headroom("sweep", str(FIX), "--task", task, "--store", str(tmp_path / "h.db"), "--no-canary")
        assert proc.returncode == 2, proc.stderr
        assert [ln.split(":")[0] + ":" for ln in refusal_lines(proc)] == [cls], proc.stderr


def test_the_network_need_is_met_by_allowing_it_and_read_from_the_task() -> None:
    tasks = load_tasks(FIX, ["needs-internet"])
    profile = faithful.Profile.declared("docker")
    assert faithful.check_tasks(tasks, profile).lines[0].startswith("network:")
    assert faithful.check_tasks(tasks, profile, env_network=True).lines == []
    # a backend that cannot cut the network gives it anyway: nothing to refuse
    open_host = faithful.Profile("local", BackendAbilities())
    assert faithful.check_tasks(tasks, open_host).lines == []


def test_allow_internet_true_is_a_need_and_false_is_a_promise(tmp_path: Path) -> None:
    fetch = "curl -fsSL https://example.org/data.csv -o data.csv\n"
    write_task(tmp_path, "wants", solve="true\n", test=fetch, extra_toml="")
    write_task(tmp_path, "offline", solve="true\n", test=fetch)
    write_task(tmp_path, "says-so", solve="true\n")
    for name, line in (("offline", "allow_internet = false"), ("says-so", "allow_internet = true")):
        toml = tmp_path / name / "task.toml"
        toml.write_text(toml.read_text().replace("[agent]", f"{line}\n[agent]"))
    got = faithful.check_tasks(load_tasks(tmp_path), faithful.Profile.declared("docker"))
    assert len(got.lines) == 1
    assert "wants (tests/test.sh: curl -fsSL https://example.org/data.csv" in got.lines[0]
    assert "says-so (allow_internet = true)" in got.lines[0] and "offline (" not in got.lines[0]


def test_architecture_is_checked_where_the_backend_knows_it() -> None:
    tasks = load_tasks(FIX, ["other-arch"])

    def on(name: str, *archs: str) -> faithful.Profile:
        return faithful.Profile(name, BackendAbilities(task_images=True, network_control=True, architectures=archs))

    assert [ln.split(":")[0] for ln in faithful.check_tasks(tasks, on("docker", "amd64")).lines] == ["CPU architecture"]
    assert faithful.check_tasks(tasks, on("docker", "s390x")).lines == []
    assert faithful.check_tasks(tasks, on("kubernetes")).lines == []


def test_bundled_tasks_declare_they_run_on_the_host() -> None:
    repo = Path(__file__).resolve().parents[2]
    got = faithful.check_tasks(load_tasks(repo / "tasks"), faithful.Profile.declared("local"))
    assert got.lines == [] and got.on_host == {}


def test_run_on_host_flag_belongs_to_the_local_backend(tmp_path: Path) -> None:
    proc = headroom("sweep", str(FIX), "--backend", "docker", "--run-on-host", "--store", str(tmp_path / "h.db"))
    assert proc.returncode == 2 and "--run-on-host applies to --backend local" in proc.stderr


@requires_cgroups
@pytest.mark.cgroup
def test_run_on_host_is_an_explicit_choice_recorded_in_provenance_and_reports(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    d = write_task(root, "portable", solve='touch "$HEADROOM_WORKDIR/out"\n')
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]", 'docker_image = "python:3.11-slim"\n[agent]'))
    store = tmp_path / "h.db"
    args = ("sweep", str(root), "--store", str(store), "--attempts", "1", "--multipliers", "unbounded")
    refused = headroom(*args, "--no-canary")
    assert refused.returncode == 2 and "portable (docker_image python:3.11-slim)" in refused.stderr
    ran = headroom(*args, "--no-canary", "--run-on-host", "--format", "markdown")
    assert ran.returncode == 0, ran.stderr
    s = Store(store)
    run = s.runs()[0]
    prov = s.provenance(run.run_id)
    assert prov.faithful is not None and prov.faithful.run_on_host is True
    assert prov.faithful.tasks_run_on_host == {"portable": "docker_image python:3.11-slim"}
    assert s.run(run.run_id).spec["run_on_host"] is True
    assert "Run on the host by choice (run_on_host): 1 task(s) without the container image they name (portable)" in (
        " ".join(ran.stdout.split())
    )


def test_the_controller_refuses_with_the_same_classes() -> None:
    """What reconcile._plan raises as SpecInvalid (a terminal condition on the Experiment)."""
    from orchestrator.controller.resources import ExperimentResourceSpec

    spec = ExperimentResourceSpec.model_validate({"name": "e", "task_source": {"bundle": "b"}})
    exp = spec.model_copy(update={"tasks_dir": str(FIX)})
    message = faithful.controller_refusal(exp, load_tasks(FIX))
    assert message is not None and "\n" not in message
    assert message.startswith("not faithful on the kubernetes backend: ")
    assert [part.split(":")[0] for part in message.split(": ", 1)[1].split(" | ")] == [
        "multi-container",
        "GPUs",
        "network",
    ]  # pods run the image and the Dockerfile's tag; a cluster's CPUs are not known here
    assert faithful.controller_refusal(exp, load_tasks(FIX, ["needs-image", "needs-dockerfile"])) is None


def test_a_hostile_image_name_stays_on_its_line(tmp_path: Path) -> None:
    d = write_task(tmp_path, "t", solve="true\n")
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]", 'docker_image = "evil\\u001b[2J\\nerror: fake"\n[agent]'))
    got = faithful.check_tasks(load_tasks(tmp_path), faithful.Profile.declared("local"))
    (line,) = got.lines
    assert "\x1b" not in line and "\n" not in line and "evil\\x1b[2J\\nerror: fake" in line


def test_the_experiment_s_image_on_local_is_refused_too(tmp_path: Path) -> None:
    from orchestrator.spec.experiment import Experiment

    write_task(tmp_path, "t", solve="true\n")
    tasks = load_tasks(tmp_path)
    exp = Experiment(tasks_dir=str(tmp_path), image="python:3.11-slim")
    (line,) = faithful.check_experiment(exp, tasks, faithful.Profile.declared("local")).lines
    assert line.startswith("container image: the experiment's image python:3.11-slim") and "--run-on-host" in line
    chosen = faithful.check_experiment(
        exp.model_copy(update={"run_on_host": True}), tasks, faithful.Profile.declared("local")
    )
    assert chosen.lines == [] and chosen.on_host == {"t": "the experiment's image python:3.11-slim"}
    assert faithful.check_experiment(exp, tasks, faithful.Profile.declared("docker")).lines == []


def test_cluster_submit_refuses_what_the_controller_would(tmp_path: Path) -> None:
    exp = tmp_path / "gpu.yaml"
    exp.write_text(f"name: gpu\ntasks_dir: {FIX}\ntasks: [needs-gpu, needs-image]\n")
    proc = headroom("cluster", "submit", str(exp), "--dry-run", "-n", "headroom")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert [ln.split(":")[0] for ln in refusal_lines(proc)] == ["GPUs"]  # a pod runs the image
    exp.write_text(f"name: img\ntasks_dir: {FIX}\ntasks: [needs-image]\n")
    assert headroom("cluster", "submit", str(exp), "--dry-run", "-n", "headroom").returncode == 0


def test_declared_verifier_outputs_are_refused_where_the_verifier_would_not_see_them(tmp_path: Path) -> None:
    """The Pod backend's verifier container gets the work dir alone: a task that declares other folders for its
    verifier ([verifier] outputs) would be graded without them there, so it is refused, and run where they go."""
    import shutil

    task = tmp_path / "tasks" / "carries-a-folder"
    shutil.copytree(FIX / "needs-image", task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(
        toml.replace("[verifier]\ntimeout_sec = 900.0\n", '[verifier]\ntimeout_sec = 900.0\noutputs = ["/srv/out"]\n')
    )
    tasks = load_tasks(tmp_path / "tasks", ["carries-a-folder"])
    assert tasks[0].spec.verifier.outputs == ["/srv/out"]
    pods = faithful.check_tasks(tasks, faithful.Profile.declared("kubernetes"), env_network=True)
    assert [ln.split(":")[0] for ln in pods.lines] == ["verifier outputs"]
    assert "carries-a-folder (/srv/out)" in pods.lines[0] and pods.lines[0].endswith("--backend local or docker")
    assert faithful.check_tasks(tasks, faithful.Profile.declared("docker"), env_network=True).lines == []
    refused = headroom("tasks", "validate", str(tmp_path / "tasks"), "--backend", "kubernetes")
    assert refused.returncode == 1 and "verifier outputs" in refused.stdout + refused.stderr
