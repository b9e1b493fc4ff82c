"""The store a new sweep records into, created only when the run is written.

Everything before that (capabilities, fit, the agent's preflight, the canary) may still refuse the
sweep, and a refused sweep must leave no store file behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.store.sqlite import Store, read_only_reason


class _Pending:
    """Marks the stand-in :func:`store_on_record` returns for a store file that does not exist yet."""

    opened: Store


def store_on_record(path: Path) -> Store:
    """The store at ``path``: opened now when it exists, else a stand-in that creates it on ``create_run``.

    An existing store is opened now: its own checks (not a headroom store, read-only) come first and
    nothing is created. ``sweep.start`` touches its store only through ``create_run``; splitting it into
    a check and a record step would let this be a plain ``Store`` again.
    """
    if path.exists():
        return Store(path)
    base = path.absolute().parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():  # what creating it would run into, said as Store says it
        raise UserError(f"cannot create the store ({base} is not a directory)", file=str(path))
    if (why := read_only_reason(path)) is not None:
        raise UserError(f"the store is read-only ({why}); copy it to a writable place to continue", file=str(path))

    class OnRecord(Store, _Pending):
        def __init__(self) -> None:  # no file yet: Store.__init__ runs in create_run
            self.path = path

        def create_run(self, **kwargs: Any) -> str:
            if not hasattr(self, "opened"):  # the oracle check (--oracle-check) may have opened it first
                self.opened = Store(path)
            return self.opened.create_run(**kwargs)

    return OnRecord()


def opened(store: Store) -> Store:
    """The real store behind :func:`store_on_record`'s stand-in (created now if not yet), or the store itself."""
    if isinstance(store, _Pending) and not hasattr(store, "opened"):
        store.opened = Store(store.path)
    return store.opened if isinstance(store, _Pending) else store
