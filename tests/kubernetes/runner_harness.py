"""Run the in-pod runner and warden for real on this host, laid out as in a trial pod.

What is real: the two POSIX-sh programs (run by dash), the task's own scripts, a PID
namespace shared by runner and warden (``unshare --pid``, as ``shareProcessNamespace``
gives a pod), and a memory cgroup of its own for the runner's "container" (its OOM
counter, its peak, and the boundary the runner sweeps). The runner runs twice, as in a
pod: its agent half first (the agent's init container), then its verifier half beside
the warden. What stands in for the pod: the directories (under ``HR_ROOT`` instead of
``/``), the ConfigMap mounts (plain copies), the termination message files, the two
containers' root filesystems (the agent's work dir is ``agent-app``, the verifier's fresh
one ``app``; nothing else of a root filesystem is stood in for: the real node's tests show
that), the agent's run dir (``headroom/agent-run``, read-only for the verifier half in a
pod), and one uid for every container (the pod gives the warden its own uid and mount
namespace; a host test cannot).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from orchestrator.backends.kubernetes import message, scripts
from orchestrator.backends.kubernetes.pod import build
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.launch import Launch
from orchestrator.tasks.files import TaskBundle

CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_V1_MEMORY = CGROUP_V1 / "memory"
CGROUP_V2 = Path("/sys/fs/cgroup")


def cgroup_usable() -> str | None:
    """Why these tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (a memory cgroup and a PID namespace)"
    if shutil.which("unshare") is None or shutil.which("dash") is None:
        return "needs unshare and dash"
    if not (CGROUP_V1_MEMORY / "cgroup.procs").exists() and not (CGROUP_V2 / "cgroup.controllers").exists():
        return "no memory cgroup hierarchy"
    return None


class MemoryCgroup:
    def __init__(self, limit_bytes: int | None = None) -> None:
        v1 = (CGROUP_V1_MEMORY / "cgroup.procs").exists()
        base = CGROUP_V1_MEMORY if v1 else CGROUP_V2
        self.path = base / f"headroom-runner-test-{uuid.uuid4().hex[:8]}"
        self.path.mkdir()
        if limit_bytes is not None:
            (self.path / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(str(limit_bytes))
            if v1:
                try:
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
                except OSError:
                    pass

        # The CPU counters the runner reads beside the OOM counter: on v2 the same directory's cpu.stat;
        # on v1 a cgroup of the cpu and of the cpuacct hierarchy, which the runner joins too.
        self.cpu_dirs: list[Path] = []
        self.cpu_env = {"HR_CPUCG": str(self.path)}
        if v1:
            cpu, acct = CGROUP_V1 / "cpu", CGROUP_V1 / "cpuacct"
            if (cpu / "cpu.stat").exists() and (acct / "cpuacct.usage").exists():
                self.cpu_dirs = [cpu / self.path.name, acct / self.path.name]
                for d in self.cpu_dirs:
                    d.mkdir()
                self.cpu_env = {"HR_CPUCG": str(self.cpu_dirs[0]), "HR_CPUACCT": str(self.cpu_dirs[1])}
            else:
                self.cpu_env = {}

    def join(self) -> str:
        """Shell that moves the current process ($$) into every directory of this cgroup."""
        return "; ".join(f"echo $$ > {d}/cgroup.procs" for d in [self.path, *self.cpu_dirs])

    def remove(self) -> None:
        for d in [self.path, *self.cpu_dirs]:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    import time

                    time.sleep(0.1)


@dataclass
class RunResult:
    message: str
    report: message.RunnerReport | None
    root: Path
    stdout: str
    returncode: int


def lay_out(root: Path, bundle: TaskBundle, include_solution: bool) -> None:
    dirs = ("headroom/task", "headroom/tests-src", "headroom/run", "headroom/agent-run", "headroom/handoff")
    for sub in (*dirs, "logs", "tests", "app", "agent-app"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for f in bundle.files:
        top = f.path.split("/", 1)[0]
        targets = []
        if top == "tests":
            targets.append(root / "headroom/tests-src" / f.path.split("/", 1)[1])
        elif top == "solution":
            if include_solution:
                targets += [root / "headroom/task" / f.path, root / "solution" / f.path.split("/", 1)[1]]
        else:
            targets.append(root / "headroom/task" / f.path)
        for t in targets:
            t.parent.mkdir(parents=True, exist_ok=True)
            t.write_bytes(f.data)
            t.chmod(0o755 if f.executable else 0o644)


#: When each program starts. ``warden_first``: both at once. ``runner_late``: the runner a second after the
#: warden (a task container still starting). ``warden_late``: the warden only once the runner has ended, as
#: when the kubelet starts the warden after a try that was over at once (the runner must not need it then).
#: Each start runs the agent's half first, alone, as the kubelet runs an init container.
STARTS = {
    "warden_first": "{agent}; dash {root}/warden.sh & w=$!; {runner} & r=$!; wait $r; wait $w",
    "runner_late": "{agent}; dash {root}/warden.sh & w=$!; sleep 1; {runner} & r=$!; wait $r; wait $w",
    "warden_late": "{agent}; {runner}; dash {root}/warden.sh",
}


def run_pod(
    tmp: Path,
    launch: Launch,
    bundle: TaskBundle,
    *,
    memory_limit: int | None = None,
    extra_env: dict[str, str] | None = None,
    stray: bool = False,
    timeout: float = 120,
    start: str = "warden_first",
) -> RunResult:
    """Run the pod's two programs in a fresh PID namespace; ``stray`` adds a process the runner cannot kill."""
    root = tmp / "pod"
    lay_out(root, bundle, launch.task.include_solution)
    pod = build(launch, KubernetesOptions(), bundle, "unused:image")
    termlog = root / "termination-log"
    cg = MemoryCgroup(memory_limit)
    common = {
        "PATH": os.environ["PATH"],
        "LC_ALL": "C",
        "HR_ROOT": str(root),
        "HR_MEMCG": str(cg.path),
        "HR_WARDEN_PATIENCE": "10",
        "HR_AGENT_RUN": str(root / "headroom/agent-run"),
        **cg.cpu_env,
    }
    halves = {"agent": pod["spec"]["initContainers"][-1], "verifier": pod["spec"]["containers"][0]}
    secret_names = {
        *next(e["value"] for e in halves["agent"]["env"] if e["name"] == "HR_SECRET_NAMES").split(),
        *(extra_env or {}).get("HR_SECRET_NAMES", "").split(),
    }
    files = {}
    for half, container in halves.items():
        env = dict(common)
        env.update({e["name"]: e["value"] for e in container["env"] if "value" in e})
        env.update(
            {
                "HR_TERMINATION_LOG": str(termlog if half == "verifier" else root / "agent-termination-log"),
                "HR_WORKDIR": str(root / ("app" if half == "verifier" else "agent-app")),
                **({"HR_RUN": str(root / "headroom/agent-run")} if half == "agent" else {}),
                **({"HR_RECORDS_REDACTED": "1"} if half == "verifier" and secret_names else {}),
                # the pod's Secret reaches the agent's container only
                **{k: v for k, v in (extra_env or {}).items() if half == "agent" or k not in secret_names},
            }
        )
        files[half] = root / f"{half}.env"
        files[half].write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items() if k.isidentifier()))
    (root / "runner.sh").write_text(scripts.runner())
    (root / "warden.sh").write_text(scripts.warden())
    stray_cmd = "sleep 300 & " if stray else ""
    # PID 1 of the namespace plays the pause container; its end kills whatever is left
    agent = f"(cd {root}/agent-app && . {files['agent']} && dash -c '{cg.join()}; exec dash {root}/runner.sh')"
    runner = f"(. {files['verifier']} && dash -c '{cg.join()}; exec dash {root}/runner.sh')"
    wrapper = stray_cmd + STARTS[start].format(root=root, runner=runner, agent=agent)
    env = {**common, **{k: v for k, v in (extra_env or {}).items() if k.startswith("HR_")}}
    try:
        # --kill-child: a run killed at its timeout takes its whole PID namespace with it (a warden left
        # spinning outlived the test)
        proc = subprocess.run(
            ["unshare", "--pid", "--kill-child", "--mount-proc", "dash", "-c", wrapper],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=root / "app",
        )
    finally:
        cg.remove()
    text = termlog.read_text() if termlog.exists() else ""
    return RunResult(text, message.parse(text), root, proc.stdout + proc.stderr, proc.returncode)
