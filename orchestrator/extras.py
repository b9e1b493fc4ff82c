"""The optional extras: which installed-on-demand package each cluster or container path needs.

The core install (local backend, reports, viewer) brings neither the Kubernetes nor the Docker client; a command
that needs one and finds it missing says which extra to install, on one line (see ``missing_extra``).
"""

from __future__ import annotations

from orchestrator.errors import UserError

#: Top-level module -> (pyproject extra, what needs it). Keep in step with [project.optional-dependencies].
EXTRAS: dict[str, tuple[str, str]] = {
    "kubernetes": ("kubernetes", "the Kubernetes backend and the cluster commands"),
    "prometheus_client": ("kubernetes", "the cluster controller"),
    "docker": ("docker", "the Docker backend and task images"),
    # never imported by headroom: the Harbor agent's adapter runs in an interpreter that has it (agents/harbor)
    "harbor": ("harbor", "Harbor's agents (agent.kind: harbor; or scripts/harbor/install.sh on Python 3.11)"),
}


def missing_extra(exc: ModuleNotFoundError) -> UserError | None:
    """The one-line error for an import that failed because an extra is not installed; None for any other."""
    root = (exc.name or "").split(".")[0]
    if root not in EXTRAS:
        return None
    extra, needed_by = EXTRAS[root]
    return UserError(
        f"{needed_by} need the Python package {root!r}, which the core install leaves out: "
        f"pip install 'headroom[{extra}]'"
    )
