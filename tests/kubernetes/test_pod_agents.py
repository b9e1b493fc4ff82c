"""Agents on Pods: an external agent runs on the host of `headroom sweep --backend kubernetes` (its pod only holds
the environment, and gets neither its secrets nor the gateway's variables); `headroom submit` and the Experiment
resource the controller reads refuse it in one line (and a host agent.path too); an installed agent's directory
becomes a read-only ConfigMap at /agent."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from orchestrator.agents.pods import pod_agent_problem
from orchestrator.backends.kubernetes.pod import EXTERNAL_START_SLACK_S, build
from orchestrator.controller.resources import ExperimentResourceSpec
from orchestrator.engine.launch import build_launch
from orchestrator.engine.plan import plan
from orchestrator.errors import SpecError
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import Launch
from orchestrator.spec.unknown import first_validation_error
from orchestrator.tasks.files import agent_files, bundle
from orchestrator.tasks.loader import load_tasks
from tests.cli_run import headroom as run_cli

REPO = Path(__file__).resolve().parents[2]


def _spec(agent: dict[str, object]) -> dict[str, object]:
    return {"name": "x", "task_source": {"bundle": "b"}, "agent": agent}


@pytest.mark.parametrize(
    ("agent", "words"),
    [
        ({"kind": "external", "command": "python3 my_agent.py"}, "external agent"),
        ({"kind": "command", "command": "bash /agent/run.sh", "path": "/home/me/agent"}, "agent.path '/home/me/agent'"),
    ],
)
def test_an_agent_that_needs_the_host_is_refused_on_its_field(agent: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError) as err:
        ExperimentResourceSpec.model_validate(_spec(agent))
    field, msg = first_validation_error(err.value)
    assert field == "agent" and words in msg


def test_agents_a_pod_runs_are_kept() -> None:
    install = {"kind": "command", "command": "run-it", "install": {"command": "pip install --user x"}}
    assert ExperimentResourceSpec.model_validate(_spec(install)).agent.install is not None
    assert ExperimentResourceSpec.model_validate(_spec({"kind": "oracle"})).agent.kind == "oracle"


def test_submit_refuses_an_external_agent_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "exp.yaml"
    f.write_text(yaml.safe_dump({**_spec({"kind": "external", "command": "python3 my_agent.py"})}))
    r = run_cli("cluster", "submit", str(f), "--dry-run", cwd=REPO, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "external agent" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def _sweep(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No cluster here and no kubeconfig: the refusal must come before any connection is tried.
    return run_cli(
        "sweep",
        str(REPO / "tasks"),
        "--backend",
        "kubernetes",
        "--store",
        str(tmp / "s.db"),
        *args,
        cwd=tmp,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "KUBECONFIG": str(tmp / "none")},
        inherit=False,
    )


def test_the_cli_runs_an_external_agent_on_pods_and_the_controller_refuses_it() -> None:
    # `headroom sweep --backend kubernetes` runs it on its own host, over pods/exec; the controller has no host.
    assert pod_agent_problem("external", None) is None
    assert "controller runs trials as pods and has no such host" in (
        pod_agent_problem("external", None, in_cluster=True) or ""
    )


def test_cli_reaches_the_cluster_with_an_external_agent_on_pods(tmp_path: Path) -> None:
    # No refusal before connecting any more: the first error is the missing kubeconfig, in one line.
    r = _sweep(tmp_path, "--agent", "external", "--agent-command", "python3 my_agent.py")
    assert r.returncode == 2, r.stderr
    assert "external agents" not in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "kubeconfig" in r.stderr


def test_an_external_agents_pod_holds_the_environment_and_gets_no_secret_or_gateway_variable(tmp_path: Path) -> None:
    launch = _launch(tmp_path, {"kind": "external", "command": "python3 my_agent.py", "env_passthrough": ["MY_TOKEN"]})
    launch.agent.env["OPENAI_API_KEY"] = "hr-per-try-key"  # as the engine adds the gateway's variables
    launch.agent.env["HEADROOM_MODEL_BASE_URL"] = "http://127.0.0.1:1/v1"
    body = build(
        launch,
        KubernetesOptions(),
        bundle("prime-count", launch.task.path, launch.task.digest),
        "img",
        secret="headroom-secrets-x",
    )
    agent = body["spec"]["initContainers"][-1]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env["HR_AGENT_EXTERNAL"] == "1" and env["HR_AGENT_SHELL"] == ""
    assert "python3 my_agent.py" not in str(body)  # the agent's command runs on the host, never in the pod
    assert "OPENAI" not in env["HR_AGENT_ENV"] and "HEADROOM_MODEL" not in env["HR_AGENT_ENV"]
    assert "export HEADROOM_SEED=" in env["HR_AGENT_ENV"]
    assert env["HR_SECRET_NAMES"] == "" and "MY_TOKEN" not in env
    assert int(env["HR_AGENT_TIMEOUT"]) == int(launch.agent.timeout_s) + EXTERNAL_START_SLACK_S
    plain = build(
        _launch(tmp_path, {"kind": "command", "command": "true"}),
        KubernetesOptions(),
        bundle("prime-count", launch.task.path, launch.task.digest),
        "img",
    )
    assert body["spec"]["activeDeadlineSeconds"] == plain["spec"]["activeDeadlineSeconds"] + EXTERNAL_START_SLACK_S


def _launch(tmp: Path, agent: dict[str, object]) -> Launch:
    exp = Experiment(
        tasks_dir=str(REPO / "tasks"), tasks=["prime-count"], configurations=["unbounded"], attempts=1, agent=agent
    )
    tasks = load_tasks(REPO / "tasks", ["prime-count"])
    return build_launch("run-a", plan(exp, tasks)[0], 0, tasks[0], exp)


def test_an_agent_directory_is_a_read_only_configmap_at_agent(tmp_path: Path) -> None:
    d = tmp_path / "my-agent"
    (d / "lib").mkdir(parents=True)
    (d / "run.sh").write_text("echo hi\n")
    (d / "run.sh").chmod(0o755)
    (d / "lib" / "blob.bin").write_bytes(bytes(range(256)))
    launch = _launch(
        tmp_path,
        {
            "kind": "command",
            "command": "bash /agent/run.sh",
            "path": str(d),
            "install": {"command": "bash /agent/run.sh"},
        },
    )
    files = agent_files(launch.agent_dir or "")
    cm = files.configmap({"app.kubernetes.io/managed-by": "headroom"})
    assert cm["immutable"] is True and cm["metadata"]["name"] == files.name
    assert sorted(cm["data"]) == [f.key for f in files.files if f.path == "run.sh"]
    assert base64.b64decode(next(iter(cm["binaryData"].values()))) == bytes(range(256))
    assert agent_files(d).name == files.name  # content-addressed: the same files, the same ConfigMap
    (d / "run.sh").write_text("echo changed\n")
    assert agent_files(d).name != files.name
    body = build(
        launch, KubernetesOptions(), bundle("prime-count", launch.task.path, launch.task.digest), "img", agent=files
    )
    (vol,) = [v for v in body["spec"]["volumes"] if v["name"] == "agent"]
    assert vol["configMap"]["name"] == files.name
    assert {i["path"]: i["mode"] for i in vol["configMap"]["items"]} == {"run.sh": 0o755, "lib/blob.bin": 0o644}
    agent, (task, warden) = body["spec"]["initContainers"][-1], body["spec"]["containers"]
    assert {"name": "agent", "mountPath": "/agent", "readOnly": True} in agent["volumeMounts"]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert "export HEADROOM_AGENT_DIR=/agent" in env["HR_AGENT_ENV"]
    assert "export HEADROOM_AGENT_DIR=/agent" in env["HR_SETUP_ENV"]
    venv = {e["name"]: e.get("value") for e in task["env"]}
    assert "HEADROOM_AGENT_DIR" not in venv["HR_VERIFIER_ENV"]
    assert all(m["name"] != "agent" for c in (task, warden) for m in c["volumeMounts"])  # the agent's half only
    plain = build(launch, KubernetesOptions(), bundle("prime-count", launch.task.path, launch.task.digest), "img")
    assert all(v["name"] != "agent" for v in plain["spec"]["volumes"])


def test_an_agent_directory_too_big_for_a_configmap_is_one_line(tmp_path: Path) -> None:
    d = tmp_path / "big-agent"
    d.mkdir()
    (d / "weights.bin").write_bytes(bytes(range(256)) * 5000)  # 1.28 MB
    with pytest.raises(SpecError) as err:
        agent_files(d)
    assert err.value.field == "agent.path" and "at most 1024 KiB" in err.value.one_line()
    assert "\n" not in err.value.one_line()


def test_the_hosts_agent_facts_join_the_runners_and_the_runner_keeps_its_measures(tmp_path: Path) -> None:
    from orchestrator.backends.kubernetes.external import PodAgent
    from orchestrator.spec.facts import StepFacts, TrialFacts

    launch = _launch(tmp_path, {"kind": "external", "command": "python3 my_agent.py"})
    facts = TrialFacts(
        enforcement="kubernetes",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="BestEffort",
        reward=1.0,
        agent=StepFacts(name="agent", exit_code=0, oom_kills=1, oom_evidence="container memcg", duration_s=9.0),
    )
    agent = PodAgent(None, "ns", launch)  # never started: the facts it would have gathered are set here
    try:
        agent.facts = StepFacts(name="agent", exit_code=3, duration_s=7.5, stdout_tail="done")
        agent.execs = 4
        (agent.logs / "result.json").write_text('{"tokens_in": 5}')
        agent.merge(facts)
    finally:
        agent.remove()
    assert facts.agent is not None and (facts.agent.exit_code, facts.agent.duration_s) == (3, 7.5)
    assert (facts.agent.oom_kills, facts.agent.oom_evidence) == (1, "container memcg")  # the runner's measure
    assert facts.reward == 1.0  # the runner's verdict, untouched
    assert facts.agent_result.get("tokens_in") == 5
    ext = facts.extra.external_agent
    assert ext is not None and ext.execs == 4 and ext.runner_phase is not None and ext.runner_phase.exit_code == 0

    never = TrialFacts(
        enforcement="kubernetes",
        request_cpus=1,
        request_memory_bytes=1,
        limit_cpus=None,
        limit_memory_bytes=None,
        qos_class="BestEffort",
        agent=StepFacts(name="agent", timed_out=True),
    )
    agent = PodAgent(None, "ns", launch)
    agent.problem = "the runner's agent phase could not be reached: gone"
    agent.merge(never)
    agent.remove()
    assert never.agent is not None and never.agent.spawn_error == agent.problem


def test_a_command_through_the_pod_exec_channel_gets_the_contracts_variables_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pod's exec wrapper runs in a real sh here, with the variables the pod's agent container is built with
    # (pod.build): a command the external agent runs sees the contract's paths and the task's variables, as
    # through the local and Docker targets (exec_env, the one definition), and the gateway's key and the
    # agent's secret never travel, neither in the pod nor in the exec's command line.
    from orchestrator.agents.external import exec_env
    from orchestrator.backends.kubernetes.external import exec_target
    from orchestrator.backends.kubernetes.signals import AGENT_CONTAINER
    from orchestrator.engine.launch import CONTRACT_PATHS

    monkeypatch.setenv("MY_TOKEN", "s3cret-value")
    launch = _launch(tmp_path, {"kind": "external", "command": "python3 my_agent.py", "env_passthrough": ["MY_TOKEN"]})
    launch.agent.env["HEADROOM_MODEL_KEY"] = "gateway-key"
    body = build(
        launch, KubernetesOptions(workdir="/tmp"), bundle("prime-count", launch.task.path, launch.task.digest), "img"
    )
    containers = [*body["spec"]["containers"], *body["spec"].get("initContainers", [])]
    (agent,) = [c for c in containers if c["name"] == AGENT_CONTAINER]
    pod_env = {e["name"]: e["value"] for e in agent["env"] if "value" in e}
    assert "s3cret-value" not in str(body) and "gateway-key" not in str(body)

    target = exec_target(None, "ns", "pod", "/tmp")
    names_ = sorted({*CONTRACT_PATHS, "HEADROOM_TASK_ID", "HEADROOM_SEED", "HEADROOM_TRIAL_ID"})
    probe = "; ".join(f'echo "{n}=${{{n}:-}}"' for n in names_) + '; echo "HR=${HR_AGENT_ENV:-}"; env'
    command = target.command(["sh", "-c", probe], cwd=None, env={"GREETING": "hi"}, timeout=30)
    assert "s3cret-value" not in str(command) and "gateway-key" not in str(command)
    assert "HEADROOM_INSTRUCTION=" not in str(command)  # the task's variables stay in the pod, not in every exec
    r = subprocess.run(command, env={"PATH": "/usr/bin:/bin", **pod_env}, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    seen = dict(line.split("=", 1) for line in r.stdout.splitlines()[: len(names_) + 1])
    want = exec_env(launch, "/tmp")  # what the Docker target gives a command in a container with WORKDIR /tmp
    assert {n: seen[n] for n in names_} == {n: want[n] for n in names_}
    assert seen["HEADROOM_WORKDIR"] == "/tmp" and seen["HEADROOM_LOGS_DIR"] == "/logs/agent"
    assert seen["HEADROOM_TASK_DIR"] == "/headroom/task" and seen["HR"] == ""
    rest = r.stdout.split("\n", len(names_) + 1)[-1]
    assert "GREETING=hi" in rest and "HEADROOM_MODEL" not in rest and "MY_TOKEN" not in rest
