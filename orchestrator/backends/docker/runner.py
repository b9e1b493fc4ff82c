"""The Docker backend's :class:`~orchestrator.contract.runner.StepRunner`: one container, driven by the Engine API.

* ``run``: an ``exec`` into the container (both roles run as the image's user, as in Harbor),
  its timeout enforced from outside (on expiry the container is stopped); OOM kills are read
  from the container's cgroup counter around it. After :meth:`stop_all` the first call starts
  the container again and requires it to keep running with the API's process list showing the
  keep-alive alone. The daemon started this container before the agent ran; only the agent
  changed it since, so a container that no longer starts, or whose keep-alive exits, is the
  agent's doing (:class:`~orchestrator.contract.runner.Tainted`: a replaced or removed
  ``sleep``), never an infra error, which would be retried: a re-roll the agent chose.
  A daemon that cannot be reached at all stays an infra error;
* ``put_tree``: one archive upload the daemon unpacks with its own code, replacing whatever
  the agent left at the path (a file, a link, a folder);
* ``read_file``: the archive endpoint (a link, a folder, a large file are refused);
* ``stop_all``: the container is stopped through the API, so the kernel kills every process in
  it, whatever the agent changed inside; the runtime's ``State.OOMKilled`` is read then.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker.errors
import requests

from orchestrator.contract.runner import NotRegular, Role, Tainted
from orchestrator.spec.facts import StepFacts

from . import steps

if TYPE_CHECKING:
    from .backend import _Container


#: How long a restarted container whose cgroup cannot be read is watched for its keep-alive exiting.
BLIND_GRACE_S = 2.0


class EngineBlind(Exception):
    """The restarted container's cgroup cannot be read and the engine reports no OOM kills (Podman)."""


class DockerRunner:
    def __init__(
        self,
        ctr: _Container,
        *,
        stream_api: Any,
        cancelled: threading.Event,
        keep_alive: list[str],
        blind_check: Callable[[], str | None],
        runtime_oom: Callable[[dict[str, Any], list[StepFacts]], None],
    ) -> None:
        self.ctr, self.api, self.stream_api, self.cancelled = ctr, ctr.api, stream_api, cancelled
        self.keep_alive, self.blind_check, self.runtime_oom = keep_alive, blind_check, runtime_oom
        #: the steps of the container's current run, last first (the runtime's OOM verdict goes to one of them)
        self.run_steps: list[StepFacts] = []
        self._stdin = itertools.count()

    def _resume(self) -> None:
        """Start the stopped container again; only its keep-alive may run in it then."""
        if self.ctr.running:
            return
        try:
            self.ctr.restart()
        except docker.errors.APIError as exc:  # the daemon answered: this container no longer starts
            raise Tainted(
                f"the container did not start again after the agent ({exc.explanation or exc}): its "
                f"keep-alive ({' '.join(self.keep_alive)}) was replaced or removed"
            ) from None
        self.run_steps = []
        self._require_running()
        if (why := self.blind_check()) is not None:
            # A keep-alive that exits at once leaves no cgroup to read either (seen under Podman): a healthy one
            # never exits, so a container that stops within a moment is the agent's doing, not a blind engine.
            if self._stops_within(BLIND_GRACE_S):
                self._require_running()
            raise EngineBlind(why)
        self.check_alone()

    def _stops_within(self, seconds: float) -> bool:
        try:
            self.api.wait(self.ctr.cid, timeout=seconds)
        except (requests.exceptions.RequestException, docker.errors.APIError):  # still running at the deadline
            return False
        return True

    def _require_running(self) -> None:
        state = self.api.inspect_container(self.ctr.cid).get("State") or {}
        if not state.get("Running"):
            self.ctr.running = False
            raise Tainted(
                f"the restarted container stopped (exit {state.get('ExitCode')}) where its keep-alive "
                f"({' '.join(self.keep_alive)}) should run: the agent replaced it"
            )

    def check_alone(self) -> None:
        try:
            procs = steps.processes(self.api, self.ctr.cid)
        except docker.errors.APIError:
            self._require_running()  # a keep-alive that exited since the start: the agent's doing
            raise
        if len(procs) != 1:
            raise Tainted(
                f"{len(procs)} processes in the restarted container, where only its keep-alive "
                f"({' '.join(self.keep_alive)}) should run (a program the agent replaced started them)"
            )

    # -- StepRunner ----------------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        role: Role,
        name: str,
        cwd: str,
        env: Mapping[str, str],
        timeout_s: float,
        stdin: bytes | None = None,
        network: bool | None = None,
    ) -> StepFacts:
        self._resume()
        if name == "verifier":
            # Checked again last before the verifier (after the sanitiser and the upload), so a process
            # started with the keep-alive has had time to show.
            self.check_alone()
        command = list(argv)
        if stdin is not None:
            path = f"/headroom/run/stdin-{next(self._stdin)}"
            steps.put_archive(
                self.api,
                self.ctr.cid,
                steps.tree_archive(dirs=[("/headroom", 0o755), ("/headroom/run", 0o755)], files=[(path, stdin, 0o644)]),
            )
            command = ["/bin/sh", "-c", 'f=$1; shift; exec "$@" < "$f"', "headroom-stdin", path, *command]
        self.ctr.step_ooms()
        facts = steps.run_step(
            self.api,
            self.stream_api,
            self.ctr.cid,
            name,
            command,
            env=dict(env),
            workdir=cwd,
            timeout_s=timeout_s,
            cancelled=self.cancelled,
            on_expiry=self.ctr.halt,
            spool=getattr(self.ctr, "spool", None),
        )  # the complete output, for the artifacts
        if facts.spawn_error and not self.cancelled.is_set():
            self._require_running()  # a keep-alive that exited under the step (a delayed exit): the agent's doing
        facts.oom_kills = self.ctr.step_ooms()
        if facts.oom_kills:
            facts.oom_evidence = self.ctr.ooms.evidence
        self.run_steps.insert(0, facts)
        return facts

    def put_tree(self, src: Path | None, dest: str) -> None:
        self._resume()
        parents: list[tuple[str, int]] = []
        parent = str(Path(dest).parent)
        while parent not in ("/", ""):
            parents.insert(0, (parent, 0o755))
            parent = str(Path(parent).parent)
        mode = 0o777 if src is None else 0o755  # a fresh logs folder: writable by any user the verifier runs as
        steps.put_archive(
            self.api,
            self.ctr.cid,
            steps.tree_archive(dirs=parents, fresh=[(dest, mode)], trees=[(src, dest)] if src is not None else []),
        )

    def read_file(self, path: str, limit: int) -> bytes | None:
        raw, why = steps.read_small(self.api, self.ctr.cid, path, limit)
        if why is not None:
            raise NotRegular(why)
        return raw

    def stop_all(self) -> None:
        self.ctr.halt()
        if self.ctr.state is not None and not self.cancelled.is_set():
            self.runtime_oom(self.ctr.state, self.run_steps)
            self.ctr.judged = self.ctr.runs
