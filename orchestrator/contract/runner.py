"""The step runner: the four operations the trial contract needs from a backend's environment.

Every backend that runs tries (local bubblewrap sandboxes, Docker containers) implements
:class:`StepRunner`; :func:`orchestrator.contract.sequence.run_try` is written against it
and nothing else, so the steps between "the agent stops" and "the reward is recorded"
exist once. The Pod backend runs the same phases inside the Pod (``runner.sh``, its phases generated
from :data:`orchestrator.contract.phases.DEFINITION`) with the same sanitiser script.

This interface is public and stable: a host-side agent (issue 21's ``$HEADROOM_EXEC``)
acts in its try's environment through :meth:`StepRunner.run` with ``role="agent"`` and
nothing else. Additions get defaults; nothing is removed or renamed.

Contract of each operation:

* :meth:`~StepRunner.run` runs one command in the try's environment, as the role's user,
  with the given working directory, environment (exactly these variables, plus what the
  environment itself defines: an image's ``ENV``), stdin bytes and timeout, and returns
  its :class:`~orchestrator.spec.facts.StepFacts`: exit code or signal, whether the
  timeout ended it, OOM kills the backend's kernel counters saw during it, and the tails
  of stdout/stderr (:data:`TAIL_BYTES`). A command that could not be started has
  ``spawn_error`` set by the runner itself, never from the command's exit code or output.
  ``role="verifier"`` runs in the verifier's view (the tests and the verifier's logs
  visible); ``role="agent"`` in the agent's (neither).
* :meth:`~StepRunner.put_tree` copies a host tree into the environment at an absolute
  path, replacing whatever is there (a file, a link, a folder the agent made).
* :meth:`~StepRunner.read_file` reads a small regular file of the environment
  (``None`` if absent; :class:`NotRegular` for a link, folder, FIFO, or one too large).
* :meth:`~StepRunner.stop_all` ends every process started in the environment so far,
  from outside it (a cgroup kill, a container stop): nothing the agent changed inside
  can keep one alive. Afterwards the environment accepts ``run`` and ``put_tree`` again
  with no agent process left; if the backend cannot guarantee that it raises
  :class:`Tainted`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from orchestrator.spec.facts import StepFacts

Role = Literal["agent", "verifier"]
#: How much of a command's stdout and stderr :meth:`StepRunner.run` keeps (the end of each).
TAIL_BYTES = 4096


@runtime_checkable
class StepRunner(Protocol):
    """One try's environment, as the trial contract drives it. See the module docstring for each operation."""

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
        """Run ``argv`` in the environment; ``name`` labels the step in the facts (``agent``, ``sanitise``...);
        ``network`` overrides the try's network setting for this command where the backend can (setup phase)."""
        ...

    def put_tree(self, src: Path | None, dest: str) -> None:
        """Make ``dest`` a fresh copy of the host tree ``src`` (``None``: a fresh empty folder)."""
        ...

    def read_file(self, path: str, limit: int) -> bytes | None:
        """The bytes of a regular file of at most ``limit`` bytes; ``None`` if nothing is there."""
        ...

    def stop_all(self) -> None:
        """End every process in the environment, from outside it."""
        ...


@runtime_checkable
class HostWalk(Protocol):
    """A runner whose environment's files are host folders (the local backend's binds) may say, by walking them,
    that the sanitiser has nothing to judge; :func:`~orchestrator.contract.sequence.run_try` then skips its script."""

    def nothing_to_sanitise(self, roots: Sequence[str], never_searched: Sequence[str]) -> bool:
        """True only if the sanitiser script would find nothing to do under ``roots`` (environment paths); False
        whenever it cannot tell (:func:`orchestrator.contract.sanitiser.nothing_to_judge`)."""
        ...
