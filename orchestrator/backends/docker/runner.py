"""The Docker backend's :class:`~orchestrator.contract.runner.StepRunner`: two containers, driven by the Engine API.

* ``run``: an ``exec`` into the current container (both roles run as the image's user, as in
  Harbor), its timeout enforced from outside (on expiry the container is stopped); OOM kills are
  read from the container's cgroup counter around it. After :meth:`stop_all` (the agent's
  container stopped) the first call starts the verifier's container: the same image, pristine,
  sharing only the carried volumes (:mod:`orchestrator.contract.carry`) with the agent's. Its
  keep-alive is the image's own ``sleep``, found on the system's PATH. Nothing the agent did
  reaches that container's system, so one that does not start or keep running is an infra
  error, not the agent's;
* ``put_tree``: one archive upload the daemon unpacks with its own code, replacing whatever
  the agent left at the path (a file, a link, a folder);
* ``read_file``: the archive endpoint (a link, a folder, a large file are refused);
* ``stop_all``: the container is stopped through the API, so the kernel kills every process in
  it, whatever the agent changed inside; the runtime's ``State.OOMKilled`` is read then.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker.errors

from orchestrator.contract import carry
from orchestrator.contract.runner import Role
from orchestrator.errors import EngineBlind, NotRegular, VerifierLost
from orchestrator.spec.facts import StepFacts

from . import steps
from .external import volume_dir

if TYPE_CHECKING:
    from .backend import _Container


def handover_archive(items: Sequence[tuple[Path | None, str]]) -> bytes:
    """One archive that makes each ``dest`` a fresh copy of its host tree (``None``: an empty folder, writable by
    any user the verifier runs as), with its parent folders."""
    parents: list[tuple[str, int]] = []
    for _src, dest in items:
        parents += [p for p in ((c, 0o755) for c in carry.components(dest)[:-1]) if p not in parents]
    return steps.tree_archive(
        dirs=parents,
        fresh=[(dest, 0o777 if src is None else 0o755) for src, dest in items],
        trees=[(src, dest) for src, dest in items if src is not None],
    )


def read_small_here(folder: Path, name: str, limit: int) -> tuple[bytes | None, str | None]:
    """:func:`.steps.read_small` on a file of a volume's folder on this machine: never through a link, never
    blocking on a FIFO, a regular file of at most ``limit`` bytes."""
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None, "its volume's folder cannot be opened"
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, "a link" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror})"
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > limit:
            return None, f"larger than {limit} bytes"
        return os.read(fd, limit + 1), None
    finally:
        os.close(fd)


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
        """After the agent's container stopped: move to the verifier's (started while the agent ran); only its
        keep-alive runs in it then."""
        if self.ctr.running:
            return
        try:
            self.ctr.to_verifier()
        except docker.errors.APIError as exc:
            raise VerifierLost(f"the verifier's container did not start: {exc.explanation or exc}") from None
        self.run_steps = []
        if (why := self.blind_check()) is not None:
            raise EngineBlind(why)
        # No process check here: this container is the image's, started by headroom, and nothing of the agent's
        # can start a process in it (its keep-alive is found on the system's PATH, never in a carried folder). A
        # keep-alive that exits is seen when a step cannot be spawned (_require_running).

    def _require_running(self) -> None:
        state = self.api.inspect_container(self.ctr.cid).get("State") or {}
        if not state.get("Running"):
            self.ctr.running = False
            raise VerifierLost(
                f"the verifier's container stopped (exit {state.get('ExitCode')}) where its keep-alive "
                f"({' '.join(self.keep_alive)}) should run"
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
        if facts.spawn_error and not self.cancelled.is_set() and self.ctr.cid != self.ctr.agent_cid:
            self._require_running()  # the verifier's keep-alive exited under the step: not the agent's doing
        facts.oom_kills = self.ctr.step_ooms()
        if facts.oom_kills:
            facts.oom_evidence = self.ctr.ooms.evidence
        self.run_steps.insert(0, facts)
        return facts

    def put_tree(self, src: Path | None, dest: str) -> None:
        self._resume()
        if (src, dest) in self.ctr.preloaded:
            return  # uploaded into the verifier's container before it started (while the agent ran): still as put
        steps.put_archive(self.api, self.ctr.cid, handover_archive([(src, dest)]))

    def read_file(self, path: str, limit: int) -> bytes | None:
        folder, _, name = path.rpartition("/")
        volume = self.ctr.mounts.get(folder)
        here = volume_dir(self.api, volume) if volume is not None and name not in ("", ".", "..") else None
        if here is not None:  # a file of a carried volume on this machine: read where the daemon keeps it
            raw, why = read_small_here(here, name, limit)
        else:
            raw, why = steps.read_small(self.api, self.ctr.cid, path, limit)
        if why is not None:
            raise NotRegular(why)
        return raw

    def stop_all(self) -> None:
        self.ctr.halt()
        if self.ctr.state is not None and not self.cancelled.is_set():
            self.runtime_oom(self.ctr.state, self.run_steps)
            self.ctr.judged = self.ctr.runs
