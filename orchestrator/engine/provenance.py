"""Provenance of a run: enough to rerun it and to explain a difference between two runs."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TypedDict

import orchestrator
from orchestrator.spec.backend import BackendFacts
from orchestrator.spec.provenance import OrchestratorInfo, Provenance

_PACKAGES = ("pydantic", "numpy", "scipy", "statsmodels", "pandas", "kubernetes")


class _Revision(TypedDict):
    revision: str | None
    dirty: bool | None


def git_revision(path: Path | None = None) -> _Revision:
    """The orchestrator's own revision, and whether its tree had local changes."""
    where = path or Path(orchestrator.__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if rev.returncode != 0:
            return {"revision": None, "dirty": None}
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return {"revision": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return {"revision": None, "dirty": None}


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def collect(backend_facts: BackendFacts | None, argv: list[str] | None = None) -> Provenance:
    """What every run records of where it ran; ``backend_facts`` None: no backend ran it (an import)."""
    prov = Provenance(
        orchestrator=OrchestratorInfo(version=orchestrator.__version__, **git_revision()),
        python=sys.version.split()[0],
        packages=package_versions(),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        started_at_local=datetime.now().astimezone().isoformat(timespec="seconds"),
        command=list(argv or []),
    )
    if backend_facts is not None:
        prov.backend = backend_facts
    return prov
