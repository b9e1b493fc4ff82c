"""Every exception headroom defines, in one tree by kind (the CLI's edge, ``cli.EXIT_MAP``, maps the kinds a user sees).

HeadroomError
├── UserError          bad input: the CLI prints it on one line and exits 2
│   ├── SpecError, NotFaithful, LabelError, NothingToCompare, KubeConfigError, SpecInvalid
├── Unavailable        a part of this host or its engine that headroom needs is missing: one line, exit 2
│   ├── SandboxUnavailable, CgroupUnavailable, FilterUnavailable, ImageUnavailable, EngineBlind
├── TryFault           one try's environment failed under it: the try's outcome records it, no command shows it
│   ├── EnvironmentGone, ExecError, VerifierLost, NotRegular, Tainted, TryCancelled
├── Signal             not a failure: a loop's cue to stop, wait or retry
│   ├── ShutDown, CatalogPending, StatusConflict
└── InternalError      headroom's own mistake, never a user's
    └── SchemaError

A class keeps the builtin base its callers caught it by (``RuntimeError``, ``ValueError``) beside its kind.
One exception lives outside: ``agents.exec.ExecChannelError``, whose module is a client copied alone into an
agent's environment and imports nothing from headroom (tests/engine/test_errors.py names it).
This module is the bottom layer (.importlinter): it imports nothing from the package.
"""

from __future__ import annotations


class HeadroomError(Exception):
    """The base of every exception headroom defines."""


# -- the user's mistakes ---------------------------------------------------------------------


class UserError(HeadroomError):
    """Bad input: names the file and the field when there is one."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ": ".join(p for p in (self.file, self.field) if p)
        return f"{where}: {self.message}" if where else self.message


class SpecError(UserError):
    """A task or experiment spec that cannot be used."""


class NotFaithful(SpecError):
    """The tasks a backend cannot run faithfully: one line per class of need."""

    def __init__(self, backend: str, lines: list[str]) -> None:
        self.lines = lines
        super().__init__(
            f"refused before anything ran: {len(lines)} kind(s) of task the {backend} backend cannot run "
            "faithfully\n" + "\n".join(f"  {line}" for line in lines)
        )


class LabelError(UserError, ValueError):
    """A configuration label that cannot be parsed."""


class NothingToCompare(UserError, ValueError):
    """Two runs that share no task, or no configuration that ran a shared task in both: no paired comparison."""


class KubeConfigError(UserError):
    """No cluster can be reached with the configuration given."""


class SpecInvalid(UserError):
    """An Experiment object that can never run as written (the API server's schema cannot see this)."""


# -- what this host lacks --------------------------------------------------------------------


class Unavailable(HeadroomError):
    """A part of this host or its engine that headroom needs is missing or unusable; the text says which."""


class SandboxUnavailable(Unavailable, RuntimeError):
    """bubblewrap is missing or cannot create namespaces here."""


class CgroupUnavailable(Unavailable, RuntimeError):
    """No writable cgroup hierarchy with the memory and cpu controllers."""


class FilterUnavailable(Unavailable, RuntimeError):
    """libseccomp (or its binding) is missing, or it cannot compile the program here."""


class ImageUnavailable(Unavailable):
    """A task image that could be neither found, pulled nor built; the text says why."""


class EngineBlind(Unavailable):
    """The verifier container's cgroup cannot be read and the engine reports no OOM kills (Podman)."""


# -- one try's environment -------------------------------------------------------------------


class TryFault(HeadroomError):
    """One try's environment failed under it: the try's outcome records it, no command prints it."""


class EnvironmentGone(TryFault, RuntimeError):
    """The local sandbox's process server is not running (it could not start, or the trial's limits killed it)."""


class ExecError(TryFault):
    """A pod exec that could not run (no such container, the runtime refused): the server's own message."""


class VerifierLost(TryFault):
    """The verifier's container (the pristine image, untouched by the agent) did not start or keep running."""


class NotRegular(TryFault):
    """``StepRunner.read_file`` found something other than a small regular file."""


class Tainted(TryFault):
    """A process the backend did not start for the verifier outlived ``stop_all``: only an agent can do that."""


class TryCancelled(TryFault):
    """A Docker try stopped because the sweep was cancelled while it ran."""


# -- signals, not failures -------------------------------------------------------------------


class Signal(HeadroomError):
    """Not a failure: a loop's cue to stop, wait or retry."""


class ShutDown(Signal):
    """The controller's work queue was shut down."""


class CatalogPending(Signal):
    """The catalog pod has not finished yet: look again in a moment."""


class StatusConflict(Signal, RuntimeError):
    """A status write kept meeting a newer version of the object."""


# -- headroom's own mistakes -----------------------------------------------------------------


class InternalError(HeadroomError):
    """headroom's own mistake, never a user's."""


class SchemaError(InternalError, ValueError):
    """A model uses a construct a structural (CRD) schema cannot express."""


#: The kinds a command's user can meet; cli.EXIT_MAP maps each to an exit code and one line.
USER_FACING: tuple[type[HeadroomError], ...] = (UserError, Unavailable)
