"""The Docker backend's side of an external agent, and what a try leaves, kept as artifacts."""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orchestrator.agents.external import environment_env, run_external
from orchestrator.artifacts import artifacts_for, names
from orchestrator.backends.docker.exec_target import ContainerExec
from orchestrator.contract import paths as cc
from orchestrator.contract.outputs import read_agent_result
from orchestrator.spec.facts import StepFacts
from orchestrator.spec.launch import Launch

#: Where an installed agent's directory is copied in the container.
AGENT_DIR = "/agent"
#: At most this much of the container's logs dir is copied out (the sink's per-try cap bounds what is kept).
MAX_LOGS_ARCHIVE = 512 * 1024 * 1024


def run_agent(
    api: docker.APIClient, stream_api: docker.APIClient, cid: str, launch: Launch, *, workdir: str, host_dir: Path
) -> tuple[StepFacts, bytes, dict]:
    """The external agent on the host against ``exec`` in the container: its facts, the exec log, and its
    self-report (written on the host)."""
    logs = host_dir / "logs"
    logs.mkdir(mode=0o700, exist_ok=True)
    env = {**environment_env(launch), **cc.step_paths("agent", workdir)}
    target = ContainerExec(api, stream_api, cid, env=env, workdir=workdir)
    run = run_external(
        launch,
        target,
        host_dir=host_dir,
        logs_dir=logs,
        workdir_inside=workdir,
        task_dir_inside=cc.TASK_DIR,
        exec_env={},
    )
    return run.agent, run.exec_log, read_agent_result(logs / "result.json")


def contract_agent(
    api: docker.APIClient, stream_api: docker.APIClient, ctr: Any, launch: Launch, *, workdir: str
) -> Callable[[Any], StepFacts]:
    """The external agent as the contract's host-side agent phase: it acts through :class:`ContainerExec` (the
    complete output, not the step runner's tails) and leaves its exec log on ``ctr.exec_log``."""

    def agent(_exec: Any) -> StepFacts:
        facts, ctr.exec_log, _report = run_agent(api, stream_api, ctr.cid, launch, workdir=workdir, host_dir=ctr.spool)
        return facts

    return agent


def keep_artifacts(
    api: docker.APIClient, cid: str | None, launch: Launch, *, host_dir: Path, exec_log: bytes | None
) -> None:
    """Both steps' complete output, the agent's logs (the host's for an external agent, and the container's
    ``/logs/agent``), the exec log."""
    sink = artifacts_for(launch)
    for name, file in (
        ("agent_setup/stdout", "agent_setup.stdout"),
        ("agent_setup/stderr", "agent_setup.stderr"),
        (names.AGENT_STDOUT, "agent.stdout"),
        (names.AGENT_STDERR, "agent.stderr"),
        (names.VERIFIER_STDOUT, "verifier.stdout"),
        (names.VERIFIER_STDERR, "verifier.stderr"),
    ):
        if (host_dir / file).is_file():
            sink.add_file(launch, name, host_dir / file)
    if (host_dir / "logs").is_dir():
        sink.add_tree(launch, names.LOGS_PREFIX, host_dir / "logs")
    if exec_log is not None:
        sink.add_bytes(launch, names.EXEC_LOG, exec_log)
    if cid is None:
        return
    with tempfile.TemporaryDirectory(prefix="headroom-logs-") as tmp:
        if _copy_out(api, cid, cc.AGENT_LOGS, Path(tmp)):
            sink.add_tree(launch, names.LOGS_PREFIX, Path(tmp) / Path(cc.AGENT_LOGS).name)


def _copy_out(api: docker.APIClient, cid: str, path: str, dest: Path) -> bool:
    """The container's ``path`` unpacked under ``dest`` with tarfile's ``data`` filter: no links out of it, no
    devices, no absolute names (what the agent put there is not trusted)."""
    try:
        stream, _stat = api.get_archive(cid, path)
        buf = io.BytesIO()
        for chunk in stream:
            buf.write(chunk)
            if buf.tell() > MAX_LOGS_ARCHIVE:
                break
        buf.seek(0)
        with tarfile.open(fileobj=buf, mode="r|*") as tar:
            tar.extractall(dest, filter="data")
        return True
    except (docker.errors.APIError, tarfile.TarError, OSError):
        return False
