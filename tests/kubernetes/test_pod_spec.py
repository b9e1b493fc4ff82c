"""The trial Pod as built: amounts, security, what each container can see, task files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.backends.kubernetes import scripts
from orchestrator.backends.kubernetes.pod import DEADLINE_SLACK_S, FINALIZER, QUEUE_LABEL, RECORDS_S, WORK_COPY_S, build
from orchestrator.contract import sanitiser
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.errors import SpecError
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.tasks.files import MAX_CONFIGMAP_BYTES, bundle, posix_cksum
from orchestrator.tasks.loader import load_tasks

REPO = Path(__file__).resolve().parents[2]


def pod_for(config: str, **opts: object) -> dict:
    exp = Experiment(tasks_dir=str(REPO / "tasks"), tasks=["word-index"], configurations=[config], attempts=1)
    tasks = load_tasks(REPO / "tasks", ["word-index"])
    launch = build_launch("run-p", plan(exp, tasks)[0], 0, tasks[0], exp)
    b = bundle("word-index", tasks[0].path, tasks[0].digest)
    return build(launch, KubernetesOptions(**opts), b, "img:1")  # type: ignore[arg-type]


def test_requests_and_limits_scale_the_task_spec() -> None:
    task = pod_for("1x/3x")["spec"]["containers"][0]  # word-index: 1 cpu, 96 MiB, 512 MiB storage
    assert task["resources"]["requests"] == {
        "cpu": "1000m",
        "memory": str(96 << 20),
        "ephemeral-storage": str(512 << 20),
    }
    assert task["resources"]["limits"] == {
        "cpu": "3000m",
        "memory": str(3 * (96 << 20)),
        "ephemeral-storage": str(3 * (512 << 20)),
    }
    assert "limits" not in pod_for("unbounded")["spec"]["containers"][0]["resources"]


def test_the_pod_deadline_covers_every_step_s_own_timeout() -> None:
    # The deadline is the pod's last resort: a step that runs to its own timeout (the sanitiser's
    # included) must end in that step's verdict, never in a deadline kill that reads as infra.
    tasks = load_tasks(REPO / "tasks", ["word-index"])
    agent_s, verifier_s = tasks[0].spec.agent.timeout_sec, tasks[0].spec.verifier.timeout_sec
    deadline = pod_for("1x-strict")["spec"]["activeDeadlineSeconds"]
    assert deadline >= agent_s + sanitiser.TIMEOUT_S + verifier_s + 60


def test_pod_settings_and_restricted_security() -> None:
    p = pod_for("1x-strict", queue="team-a")
    spec = p["spec"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    assert spec["shareProcessNamespace"] is True
    assert p["metadata"]["finalizers"] == [FINALIZER]
    assert p["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    assert "headroom.dev/spec-digest" in p["metadata"]["annotations"]
    task, warden = spec["containers"]
    assert task["securityContext"]["runAsNonRoot"] and task["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert warden["securityContext"]["runAsUser"] != task["securityContext"]["runAsUser"]
    assert "workingDir" not in task  # the image's WORKDIR
    root = pod_for("1x-strict", run_as_root=True)["spec"]["containers"][0]["securityContext"]
    assert "runAsNonRoot" not in root


@pytest.mark.parametrize("run_as_root", [False, True], ids=["restricted", "root"])
def test_the_agent_runs_in_an_init_container_the_verifier_in_a_fresh_one_of_the_same_image(run_as_root: bool) -> None:
    """The verifier's container starts only after the agent's has exited, from the image: nothing the agent installed
    is in its root filesystem. The two share only the logs, the task's files and the agent's run dir (read-only for
    the verifier: the work dir the agent left); the agent's container has no /tests, no hand-over channel and no
    handoff, so nothing it leaves there (a squatted /tests, a pre-made request or FIFO) reaches the verifier's."""
    spec = pod_for("1x-strict", run_as_root=run_as_root)["spec"]
    agent = spec["initContainers"][-1]
    task, warden = spec["containers"]
    assert (agent["name"], task["name"]) == ("agent", "task")
    assert agent["image"] == task["image"] == warden["image"] and agent["command"] == task["command"]
    assert agent["resources"] == task["resources"] and agent["securityContext"] == task["securityContext"]

    def env(c: dict) -> dict[str, str]:
        return {e["name"]: e.get("value", "") for e in c["env"]}

    def mounts(c: dict) -> dict[str, dict]:
        return {m["mountPath"]: m for m in c["volumeMounts"]}

    assert env(agent)["HR_ROLE"] == "agent" and env(task)["HR_ROLE"] == "verifier"
    assert "HR_TESTS_MANIFEST" not in env(agent) and "HR_VERIFIER_ENV" not in env(agent)  # the verifier's alone
    assert "HR_AGENT_SHELL" not in env(task) and "HR_SECRET_NAMES" not in env(task)  # the agent's alone
    # the oracle: solution; /headroom/bin: the runner itself (read-only, the same programs the verifier's half runs)
    assert set(mounts(agent)) - {"/solution"} == {"/headroom/task", "/logs", "/headroom/run", "/headroom/bin"}
    assert {"/tests", "/headroom/handoff", "/headroom/agent-run"} <= set(mounts(task))
    assert mounts(task)["/headroom/agent-run"]["name"] == mounts(agent)["/headroom/run"]["name"]
    assert mounts(task)["/headroom/agent-run"]["readOnly"] is True
    # the hand-over channel (requests, the FIFO, the start marker) is the verifier's and the warden's own volume
    assert mounts(task)["/headroom/run"]["name"] == mounts(warden)["/headroom/run"]["name"] == "vrun"
    assert "vrun" not in {m["name"] for m in agent["volumeMounts"]}
    # the deadline holds both copies of the work dir besides the steps: never reached by a slow copy
    assert spec["activeDeadlineSeconds"] >= 2 * WORK_COPY_S + 2 * RECORDS_S + DEADLINE_SLACK_S


def test_restricted_pods_stay_restricted_with_the_agents_container() -> None:
    spec = pod_for("1x-strict")["spec"]
    for c in [*spec["initContainers"], *spec["containers"]]:
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False, c["name"]
        assert sc["capabilities"] == {"drop": ["ALL"]}, c["name"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_only_the_warden_mounts_the_tests() -> None:
    spec = pod_for("1x-strict")["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    task, warden = spec["containers"]

    def paths(container: dict) -> set[str]:
        out = set()
        for m in container["volumeMounts"]:
            cm = volumes[m["name"]].get("configMap")
            if cm:
                out |= {i["path"] for i in cm["items"]}
        return out

    assert not any(p.startswith("tests/") or p == "test.sh" for p in paths(task))
    assert {"test.sh", "check.py"} <= paths(warden)
    assert all(i["path"] for v in volumes.values() if (cm := v.get("configMap")) for i in cm["items"])
    handoff = next(m for m in task["volumeMounts"] if m["name"] == "handoff")
    assert handoff["readOnly"] is True


@pytest.mark.parametrize("run_as_root", [False, True], ids=["restricted", "root"])
def test_the_runner_and_warden_are_mounted_from_their_configmap_not_inlined(run_as_root: bool) -> None:
    """Each container running a program runs it from the read-only ``scripts`` volume: the ConfigMap of exactly the
    generated runner and warden, immutable and named by their content (another version's programs are never
    mounted). Inlined, every pod object and every watch event about it carried the runner twice (about 120 KB)."""
    spec = pod_for("1x-strict", run_as_root=run_as_root)["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    cm = scripts.configmap({"app.kubernetes.io/managed-by": "headroom"})
    assert cm["immutable"] is True and cm["data"] == {"runner.sh": scripts.runner(), "warden.sh": scripts.warden()}
    assert volumes["scripts"]["configMap"] == {
        "name": cm["metadata"]["name"],
        "items": [{"key": k, "path": k, "mode": 0o444} for k in ("runner.sh", "warden.sh")],
    }
    assert cm["metadata"]["name"] == scripts.configmap_name() and len(cm["metadata"]["name"]) <= 253
    programs = {"agent": "runner.sh", "task": "runner.sh", "warden": "warden.sh"}
    for c in [*spec["initContainers"], *spec["containers"]]:
        mount = next(m for m in c["volumeMounts"] if m["name"] == "scripts")
        assert mount == {"name": "scripts", "mountPath": "/headroom/bin", "readOnly": True}, c["name"]
        assert c["command"] == ["/bin/sh", f"/headroom/bin/{programs[c['name']]}"], c["name"]
    assert len(json.dumps(spec)) < 16_000  # the programs are not in the pod object


def test_posix_cksum_matches_the_cksum_tool(tmp_path: Path) -> None:
    for data in (b"", b"a", b"hello world\n", bytes(range(256)) * 300):
        f = tmp_path / "f"
        f.write_bytes(data)
        out = subprocess.run(["cksum", str(f)], capture_output=True, text=True, check=True).stdout.split()
        assert (int(out[0]), int(out[1])) == (posix_cksum(data), len(data))


def test_a_task_too_big_for_a_configmap_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * (MAX_CONFIGMAP_BYTES + 1))
    with pytest.raises(SpecError, match="ConfigMap"):
        bundle("big", tmp_path, "0" * 64)


def test_the_secrets_object_name_is_a_dns_subdomain_whatever_the_run_label() -> None:
    """A run id's label value keeps its upper case (20261202T045429Z-...); the Secret's name may not (found on the
    real node: every pod of a run with --agent-env was refused)."""
    import re

    from orchestrator.backends.kubernetes.pod import secret_name

    name = secret_name("20261202T045429Z-fcd537")
    assert name == "headroom-secrets-20261202t045429z-fcd537"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", secret_name("Run_ID.Z-")) is not None


def test_a_host_side_install_step_is_held_by_the_runners_agent_phase_and_the_deadline() -> None:
    # An external agent's install step (a Harbor installed agent's setup) runs on the host inside the runner's held
    # agent phase: the phase and the pod's deadline hold its own timeout too, or a slow install would read as the
    # runner's deadline (infra, retried) instead of the install's own verdict.
    from orchestrator.spec.launch import HostAgent, HostSetup

    exp = Experiment(
        tasks_dir=str(REPO / "tasks"),
        tasks=["word-index"],
        configurations=["1x-strict"],
        attempts=1,
        agent={"kind": "external", "command": "true"},
    )
    tasks = load_tasks(REPO / "tasks", ["word-index"])
    launch = build_launch("run-p", plan(exp, tasks)[0], 0, tasks[0], exp)
    b = bundle("word-index", tasks[0].path, tasks[0].digest)

    def held(pod: dict) -> tuple[int, int]:
        env = {e["name"]: e.get("value") for c in pod["spec"]["initContainers"] for e in c.get("env", [])}
        return int(env["HR_AGENT_TIMEOUT"]), pod["spec"]["activeDeadlineSeconds"]

    assert launch.host_agent is not None and launch.host_agent.setup is None
    phase, deadline = held(build(launch, KubernetesOptions(), b, "img:1"))
    with_setup = launch.model_copy(update={"host_agent": HostAgent(setup=HostSetup(shell="install", timeout_s=500.0))})
    phase_s, deadline_s = held(build(with_setup, KubernetesOptions(), b, "img:1"))
    assert (phase_s - phase, deadline_s - deadline) == (500, 500)


TOLERATIONS = [
    {"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "toleration_seconds": 30},
]


def test_tolerations_are_spelt_as_the_api_server_spells_them_and_a_misspelt_one_is_refused() -> None:
    """Pods are created under strict field validation, so the options check each toleration when the experiment is
    read: the Python client's ``toleration_seconds`` becomes the API's ``tolerationSeconds``, and a field no
    toleration has is refused there, in the experiment, not by the API server on every try."""
    pod = pod_for("1x-strict", tolerations=TOLERATIONS)
    assert pod["spec"]["tolerations"][1] == {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    }
    for bad, field in (
        ({"key": "a", "operatr": "Exists"}, "operatr"),
        ({"key": "a", "operator": "Sometimes"}, "operator"),
        ({"tolerationSeconds": "x"}, "tolerationSeconds"),
    ):
        with pytest.raises(ValidationError) as refused:
            KubernetesOptions(tolerations=[TOLERATIONS[0], bad])
        assert refused.value.errors()[0]["loc"] == ("tolerations", 1, field)  # the one refused, by its place


class _Sent(Exception):
    """Raised by :class:`_Capture` with the body a request would have sent."""


def _capturing_client() -> object:
    """An ``ApiClient`` whose requests stop where they would be sent, keeping what would go on the wire (no API
    server is asked: only the client's own serialisation is compared)."""
    from kubernetes import client

    class Capture(client.ApiClient):
        def call_api(
            self, method: str, url: str, header_params: object = None, body: object = None, *rest: object, **kw: object
        ):  # type: ignore[no-untyped-def]
            raise _Sent(method, url, header_params, json.loads(json.dumps(body)))

    return Capture(client.Configuration(host="https://headroom.invalid"))


@pytest.mark.parametrize(
    ("config", "opts"),
    [
        ("1x/3x", {}),
        ("unbounded", {}),
        ("1x-strict", {"run_as_root": True}),
        ("2x", {"queue": "team-a"}),
        ("1x/2x", {"tolerations": TOLERATIONS, "node_selector": {"pool": "a"}, "runtime_class_name": "gvisor"}),
    ],
    ids=["bounded", "unbounded", "root", "queued", "tolerations"],
)
def test_the_pod_goes_out_as_the_same_json_the_typed_client_sent(config: str, opts: dict[str, object]) -> None:
    """The backend creates its pods with the body as built (``kube.raw``), no longer through the generated
    ``create_namespaced_pod``, which validated the dict into a ``V1Pod`` and dumped it back on every create. That
    round trip changed nothing of these bodies, so leaving it out changes nothing the API server sees: a field the
    client's models dropped, renamed or defaulted would show here."""
    from kubernetes import client

    from orchestrator.kube import raw

    body = pod_for(config, **opts)
    capture = _capturing_client()
    with pytest.raises(_Sent) as typed:
        client.CoreV1Api(capture).create_namespaced_pod("ns", body)  # type: ignore[arg-type]
    with pytest.raises(_Sent) as sent:
        raw.request(capture, "POST", "/api/v1/namespaces/ns/pods", body=body)
    t_method, t_url, _, t_body = typed.value.args
    r_method, r_url, r_headers, r_body = sent.value.args
    assert (r_method, r_url) == (t_method, t_url)
    assert r_headers["Content-Type"] == "application/json"  # type: ignore[index]
    assert r_body == t_body == json.loads(json.dumps(body))
