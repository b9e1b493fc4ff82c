"""The Pod of one try: requests and limits, the runner and the warden, the contract's mounts.

Three containers, in two stages (see docs/kubernetes-backend.md, "The Pod"):

* ``agent`` (an init container): the task's image, running the runner's agent half
  (setup, agent check, agent, stop) with the image's WORKDIR as cwd; it then copies the work
  dir into the ``run`` emptyDir. Everything the agent installed dies with this container's
  root filesystem: the kubelet starts the next stage only once it has exited.
* ``task``: the same image, started afresh (a pristine root filesystem), running the runner's
  verifier half: the agent's work dir copied back in, the tests handed over, the sanitiser,
  the verifier, the reward, the record; the try's termination message. It mounts the agent's
  ``run`` read-only, and keeps its own hand-over channel (``vrun``) the agent never saw.
* ``warden``: the same image (already pulled), another uid, no capabilities, a few MiB; the
  only container that mounts the task's tests. It hands them over through an emptyDir only
  once no process but the verifier's runner is left in the pod (see ``warden.sh``).

Requests = base x request multiplier, limits = base x limit multiplier (none when unbounded),
for cpu, memory and ephemeral-storage, on ``agent`` and ``task`` alike (an init container's
requests are not added to the pod's: the pod requests what it did with one task container);
under limit-aware placement also the extended resource of ``limit_resource.py``.

Security: Pod Security "restricted" by default (non-root, no privilege escalation,
all capabilities dropped, RuntimeDefault seccomp); ``run_as_root`` relaxes the agent and
verifier containers to "baseline" for images that need root, and is recorded in provenance.
No service-account token is mounted, so an agent has no API credentials.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from orchestrator.backends.kubernetes import scripts
from orchestrator.backends.kubernetes.signals import AGENT_CONTAINER, TASK_CONTAINER, WARDEN_CONTAINER
from orchestrator.contract import agent_check, phases, sanitiser
from orchestrator.contract import paths as cc
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import Launch, StepLaunch, environment_network
from orchestrator.tasks.files import AGENT_DIR, AgentFiles, ImageTaskFiles, TaskBundle

ARCH_LABEL = "kubernetes.io/arch"  # the well-known label a node's kubelet sets to its CPU architecture

FINALIZER = "headroom.dev/harvest"
MANAGED_BY = {"app.kubernetes.io/managed-by": "headroom"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
NETWORK_LABEL = "headroom.dev/network"
HARVESTED_LABEL = "headroom.dev/harvested"
WARDEN_UID = 65532
WARDEN_RESOURCES = {"cpu": "10m", "memory": "16Mi"}
TASK_FILES_CONTAINER = "task-files"
#: requests = limits, so a Guaranteed trial pod stays Guaranteed; cp needs little memory.
TASK_FILES_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
_FILL = "/headroom/fill"
#: The warden copies the tests here for the runner (both containers mount it).
HANDOFF = "/headroom/handoff"
#: Time beyond the step timeouts (agent, sanitiser, verifier) for the image pull, start-up and the tests' handover.
DEADLINE_SLACK_S = 180
#: Each copy of the agent's work dir (out of the agent's container, into the verifier's) is stopped after this long:
#: a work dir that cannot be copied in time is the agent's failure (unjudged_state), never the pod's deadline.
WORK_COPY_S = 120
#: All of one half's staging of the record (runner.sh, stage_bounded) is stopped after this long.
RECORDS_S = 60
#: The agent's run dir (its runner's scratch, the work dir it carried out, the external agent's markers): the
#: ``run`` emptyDir, at RUN in the agent's container and read-only at AGENT_RUN in the verifier's.
RUN = "/headroom/run"
AGENT_RUN = "/headroom/agent-run"
#: An external agent's phase in the pod waits this long beyond the agent's timeout: the host sees the pod
#: running and connects first (its own clock enforces the agent's timeout).
EXTERNAL_START_SLACK_S = 120


def _cpu(value: float) -> str:
    return f"{max(1, math.ceil(value * 1000))}m"


def resources(launch: Launch, extended: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Requests and limits of the task container; ``extended`` resources are both (Kubernetes needs them equal)."""
    a = launch.amounts
    out: dict[str, dict[str, str]] = {
        "requests": {
            "cpu": _cpu(a.request_cpus),
            "memory": str(a.request_memory_bytes),
            "ephemeral-storage": str(launch.request_storage_bytes),
        }
    }
    limits: dict[str, str] = {}
    if a.limit_cpus is not None:
        limits["cpu"] = _cpu(a.limit_cpus)
    if a.limit_memory_bytes is not None:
        limits["memory"] = str(a.limit_memory_bytes)
    if launch.limit_storage_bytes is not None:
        limits["ephemeral-storage"] = str(launch.limit_storage_bytes)
    out["requests"].update(extended or {})
    limits.update(extended or {})
    if limits:
        out["limits"] = limits
    return out


def env_script(env: dict[str, str]) -> str:
    """Variables as ``export`` lines the runner evaluates in the step's own subshell."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()) if k.isidentifier())


def host_setup_s(launch: Launch) -> float:
    """An external agent's install step runs on the host inside the runner's agent phase: the phase holds it too."""
    setup = launch.host_agent.setup if launch.host_agent is not None else None
    return setup.timeout_s if setup is not None else 0.0


def _step_env(step: StepLaunch, phase: phases.Phase, extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    """A launch command's variables, named as the phase's definition names them (the runner's are rendered from it)."""
    prefix = phases.get(phase).pod_prefix
    env = [
        {"name": f"HR_{prefix}_ENV", "value": env_script({**step.env, **(extra or {})})},
        {"name": f"HR_{prefix}_TIMEOUT", "value": str(max(1, math.ceil(step.timeout_s)))},
    ]
    if step.script is not None:
        env.append({"name": f"HR_{prefix}_SCRIPT", "value": step.script})
    else:
        env.append({"name": f"HR_{prefix}_SHELL", "value": step.shell or ""})
    return env


def _external_agent_env(launch: Launch) -> list[dict[str, str]]:
    """An external agent's phase in the pod: the runner holds the environment (``HR_AGENT_EXTERNAL``) for the
    agent's timeout plus the host's start-up slack; ``HR_AGENT_ENV`` is what a command exec'd in the pod sees
    (the contract's and the task's variables, never the gateway's key), read by exec_target.WRAPPER."""
    from orchestrator.agents.external import environment_env

    return [
        {"name": "HR_AGENT_EXTERNAL", "value": "1"},
        {"name": "HR_AGENT_ENV", "value": env_script(environment_env(launch))},
        {
            "name": "HR_AGENT_TIMEOUT",
            "value": str(math.ceil(launch.agent.timeout_s + host_setup_s(launch) + EXTERNAL_START_SLACK_S)),
        },
        {"name": "HR_AGENT_SHELL", "value": ""},
    ]


def kubelet_literal(text: str) -> str:
    """``text`` as a container command string the kubelet passes on unchanged.

    The kubelet expands ``$(VAR)`` in command and args and turns ``$$`` into ``$``, so a
    script's ``ME=$$`` arrived as ``ME=$``. Doubling every ``$`` is undone exactly.
    """
    return text.replace("$", "$$")


def secret_name(run_label: str) -> str:
    """A DNS-1123 subdomain: a run label may hold upper case (``20261202T045429Z-...``), an object name may not."""
    name = re.sub(r"[^a-z0-9.-]", "-", f"headroom-secrets-{run_label}".lower())
    return name[:253].rstrip("-.")


def copy_task_script(task_id: str, root: str, solution: bool, fill: str = _FILL) -> str:
    """The init container's copy of ``<root>/<task id>/`` into the volumes a ConfigMap bundle would fill:
    everything but tests/ and solution/ into the task volume, tests/ into tests-src (the warden's),
    solution/ into both when the oracle runs (as the ConfigMap items do). Modes come from the image
    (``headroom tasks image`` makes files world-readable), so the task and warden uids can read them."""
    src, fill = shlex.quote(f"{root}/{task_id}"), shlex.quote(fill)
    lines = [
        "set -eu",
        f"cd {src}",
        "for e in * .[!.]* ..?*; do",
        '  [ -e "$e" ] || continue',
        '  case "$e" in tests|solution) continue ;; esac',
        f'  cp -R "$e" {fill}/task/',
        "done",
        f"if [ -d tests ]; then cp -R tests/. {fill}/tests-src/; fi",
    ]
    if solution:
        lines.append(f"if [ -d solution ]; then cp -R solution {fill}/task/ && cp -R solution/. {fill}/solution/; fi")
    return "\n".join(lines) + "\n"


def _image_task_files(
    files: ImageTaskFiles, options: KubernetesOptions, solution: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The init container that fills the task, tests-src (and solution) emptyDirs from the task-set image."""
    from orchestrator.tasks.image import ROOT

    names = ["task", "tests-src", *(["solution"] if solution else [])]
    container = {
        "name": TASK_FILES_CONTAINER,
        "image": files.image,
        "imagePullPolicy": options.image_pull_policy,
        "command": ["/bin/sh", "-c", kubelet_literal(copy_task_script(files.task_id, ROOT, solution))],
        "resources": {"requests": dict(TASK_FILES_RESOURCES), "limits": dict(TASK_FILES_RESOURCES)},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": WARDEN_UID,
            "runAsGroup": WARDEN_UID,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": n, "mountPath": f"{_FILL}/{n}"} for n in names],
    }
    return container, [{"name": n, "emptyDir": {}} for n in names]


def build(
    launch: Launch,
    options: KubernetesOptions,
    bundle: TaskBundle | ImageTaskFiles,
    image: str,
    secret: str | None = None,
    extended: dict[str, str] | None = None,
    agent: AgentFiles | None = None,
) -> dict[str, Any]:
    labels = {
        **options.pod_labels,
        **launch.labels,
        **MANAGED_BY,
        NETWORK_LABEL: "internet" if environment_network(launch) else "none",
    }
    if options.queue:
        labels[QUEUE_LABEL] = options.queue
    annotations = {
        **options.pod_annotations,
        "headroom.dev/spec-digest": launch.spec_digest,
        "headroom.dev/run-id": launch.run_id,
        "headroom.dev/trial-id": launch.trial_id,
        "headroom.dev/task-digest": launch.task.digest,
        "headroom.dev/agent-ran-in": f"container {AGENT_CONTAINER}",
    }
    agent_dir = {"HEADROOM_AGENT_DIR": AGENT_DIR} if agent is not None else None
    external = launch.agent_kind == "external"
    verifier = launch.verifier
    assert verifier is not None  # the backend refuses a task without tests/ before building its pod (submit)
    # Each half of the runner gets only its own variables: the agent's container never holds the tests'
    # manifest or the verifier's script and environment, the verifier's never holds a secret.
    agent_env: list[dict[str, Any]] = [
        {"name": "HR_ROLE", "value": "agent"},
        *(_external_agent_env(launch) if external else _step_env(launch.agent, phases.Phase.AGENT, agent_dir)),
        *(_step_env(launch.agent_setup, phases.Phase.AGENT_SETUP, agent_dir) if launch.agent_setup is not None else []),
        # An external agent's secrets stay on the host with it: the pod never gets them.
        {"name": "HR_SECRET_NAMES", "value": "" if external else " ".join(launch.agent.secret_env)},
        {"name": "HR_WORK_COPY_S", "value": str(WORK_COPY_S)},
        {"name": "HR_RECORDS_S", "value": str(RECORDS_S)},
    ]
    verifier_env: list[dict[str, Any]] = [
        {"name": "HR_ROLE", "value": "verifier"},
        *_step_env(verifier, phases.Phase.VERIFIER),
        {"name": "HR_TESTS_MANIFEST", "value": bundle.tests_manifest()},
        # The warden's handoff holds the tests too: a link into it is as good as one into /tests.
        {
            "name": "HR_VERIFIER_ONLY",
            "value": " ".join((*cc.verifier_only_paths(launch.task.include_solution), HANDOFF)),
        },
        {"name": "HR_WORK_COPY_S", "value": str(WORK_COPY_S)},
        {"name": "HR_RECORDS_S", "value": str(RECORDS_S)},
    ]
    if not external and launch.agent.shell and (target := agent_check.target(launch.agent.shell)) is not None:
        agent_env.append({"name": "HR_AGENT_PROGRAM", "value": target.program})  # the agent_check phase resolves it
        if target.script:  # an interpreter's script (python3 agent.py): the check's third argument
            agent_env.append({"name": "HR_AGENT_PROGRAM_SCRIPT", "value": target.script})
    if options.workdir:
        agent_env.append({"name": "HR_WORKDIR", "value": options.workdir})
        verifier_env.append({"name": "HR_WORKDIR", "value": options.workdir})
    if launch.agent.secret_env and not external:
        # The verifier's half keeps only the record the agent's half staged and redacted, never the raw logs.
        verifier_env.append({"name": "HR_RECORDS_REDACTED", "value": "1"})
    if secret and not external:
        agent_env += [
            {"name": n, "valueFrom": {"secretKeyRef": {"name": secret, "key": n, "optional": True}}}
            for n in launch.agent.secret_env
        ]
    init: list[dict[str, Any]] = []
    if isinstance(bundle, ImageTaskFiles):
        copier, file_volumes = _image_task_files(bundle, options, launch.task.include_solution)
        init.append(copier)
    else:
        cm = bundle.name
        file_volumes = [
            {"name": "task", "configMap": {"name": cm, "items": bundle.items("")}},
            {"name": "tests-src", "configMap": {"name": cm, "items": bundle.items("tests", strip=True)}},
        ]
    volumes: list[dict[str, Any]] = [
        *file_volumes[:2],
        {"name": "logs", "emptyDir": {}},
        {"name": "tests", "emptyDir": {}},
        {"name": "run", "emptyDir": {}},  # the agent's: its runner's scratch and the work dir it carries out
        {"name": "vrun", "emptyDir": {}},  # the verifier's and the warden's: the agent never mounts it
        {"name": "handoff", "emptyDir": {}},
        scripts.volume(),  # the runner and the warden (scripts.py): mounted, not inlined in every pod object
    ]
    # The agent's container: no /tests, no hand-over channel, no handoff. As root the agent may create a
    # /tests of its own; it lives in a root filesystem the verifier never sees.
    agent_mounts: list[dict[str, Any]] = [
        {"name": "task", "mountPath": cc.TASK_DIR, "readOnly": True},
        {"name": "logs", "mountPath": cc.LOGS},
        {"name": "run", "mountPath": RUN},
        scripts.mount(),
    ]
    verifier_mounts: list[dict[str, Any]] = [
        {"name": "task", "mountPath": cc.TASK_DIR, "readOnly": True},
        {"name": "logs", "mountPath": cc.LOGS},
        {"name": "tests", "mountPath": cc.TESTS},
        {"name": "vrun", "mountPath": RUN},
        {"name": "run", "mountPath": AGENT_RUN, "readOnly": True},
        {"name": "handoff", "mountPath": HANDOFF, "readOnly": True},
        scripts.mount(),
    ]
    if launch.task.include_solution:
        if isinstance(bundle, ImageTaskFiles):
            volumes.append(file_volumes[2])
        else:
            sol = bundle.items("solution", strip=True)
            volumes[0]["configMap"]["items"] += bundle.items("solution")
            volumes.append({"name": "solution", "configMap": {"name": cm, "items": sol}})
        agent_mounts.append({"name": "solution", "mountPath": cc.SOLUTION, "readOnly": True})
        verifier_mounts.append({"name": "solution", "mountPath": cc.SOLUTION, "readOnly": True})
    if agent is not None:  # an installed agent's directory, read-only, in the agent's container only
        volumes.append({"name": "agent", "configMap": {"name": agent.name, "items": agent.items()}})
        agent_mounts.append({"name": "agent", "mountPath": AGENT_DIR, "readOnly": True})
    if options.run_as_root:
        task_security: dict[str, Any] = {"capabilities": {"drop": ["SYS_PTRACE"]}}
        pod_security: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    else:
        task_security = {
            "runAsNonRoot": True,
            "runAsUser": options.run_as_user,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
        pod_security = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}

    def runner_container(name: str, env: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
        c: dict[str, Any] = {
            "name": name,
            "image": image,
            "imagePullPolicy": options.image_pull_policy,
            "command": scripts.command(scripts.RUNNER),
            "env": env,
            "resources": resources(launch, extended),
            "securityContext": dict(task_security),
            "volumeMounts": mounts,
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }
        if options.workdir:
            c["workingDir"] = options.workdir
        return c

    agent_container = runner_container(AGENT_CONTAINER, agent_env, agent_mounts)
    task_container = runner_container(TASK_CONTAINER, verifier_env, verifier_mounts)
    warden = {
        "name": WARDEN_CONTAINER,
        "image": options.warden_image or image,
        "imagePullPolicy": options.image_pull_policy,
        "command": scripts.command(scripts.WARDEN),
        "resources": {"requests": dict(WARDEN_RESOURCES), "limits": dict(WARDEN_RESOURCES)},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": WARDEN_UID,
            "runAsGroup": WARDEN_UID,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "tests-src", "mountPath": "/headroom/tests-src", "readOnly": True},
            {"name": "vrun", "mountPath": RUN},
            {"name": "handoff", "mountPath": HANDOFF},
            scripts.mount(),
        ],
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": math.ceil(
            launch.agent.timeout_s
            + sanitiser.TIMEOUT_S
            + verifier.timeout_s
            + 2 * WORK_COPY_S
            + 2 * RECORDS_S
            + DEADLINE_SLACK_S
            + (EXTERNAL_START_SLACK_S + host_setup_s(launch) if external else 0)
        ),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "shareProcessNamespace": True,
        "terminationGracePeriodSeconds": 5,
        "securityContext": pod_security,
        "initContainers": [*init, agent_container],
        "containers": [task_container, warden],
        "volumes": volumes,
    }
    # a task built for one CPU goes to a node of it (a mixed cluster); the faithful check saw one is schedulable
    selector = {**options.node_selector, **({ARCH_LABEL: launch.task.architecture} if launch.task.architecture else {})}
    if selector:
        spec["nodeSelector"] = selector
    if options.tolerations:
        spec["tolerations"] = list(options.tolerations)
    if options.runtime_class_name:
        spec["runtimeClassName"] = options.runtime_class_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": launch.name, "labels": labels, "annotations": annotations, "finalizers": [FINALIZER]},
        "spec": spec,
    }


def network_policy() -> dict[str, Any]:
    """Deny all traffic to and from trial pods labelled network=none (enforced where the CNI supports it)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "headroom-no-network", "labels": dict(MANAGED_BY)},
        "spec": {"podSelector": {"matchLabels": {NETWORK_LABEL: "none"}}, "policyTypes": ["Ingress", "Egress"]},
    }
