"""A run named on the command line: a run id in --store, a store file (its latest run), or FILE:RUN_ID."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.store.sqlite import Store

#: Run ids look like 20261201T081841Z-91f7f4; anything with these endings or a slash was meant as a file.
STORE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def looks_like_file(ref: str) -> bool:
    return "/" in ref or ref.lower().endswith(STORE_SUFFIXES)


def open_run(ref: str, default_store: Path) -> tuple[Store, str | None]:
    """(store, run id); the run id is None for a store file given alone (its latest run)."""
    from orchestrator.store.sqlite import Store

    if Path(ref).is_file():
        return Store.open_existing(ref), None
    path, _, rid = ref.rpartition(":")
    if path and Path(path).is_file():
        store = Store.open_existing(path)
        return store, store.run(rid).run_id
    if path and looks_like_file(path) and ":" not in path:  # FILE:RUN_ID whose FILE is missing
        raise UserError("no such file", file=path)
    if looks_like_file(ref):
        # A mistyped file name must not be reported as a problem with the default store.
        known = False
        if default_store.is_file():
            try:
                other = Store.open_existing(default_store)
            except UserError:
                pass
            else:
                known = any(r.run_id == ref for r in other.runs())
                other.close()
        if not known:
            raise UserError(f"no such file (and no run with that id in {default_store})", file=ref)
    store = Store.open_existing(default_store)
    return store, store.run(ref).run_id
