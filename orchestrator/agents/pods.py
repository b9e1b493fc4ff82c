"""Which agents a trial pod can run: what needs a host beside the trial is refused before anything starts.

An external agent runs on the host of ``headroom sweep --backend kubernetes`` and acts on the try's pod over
``pods/exec`` (orchestrator/backends/kubernetes/external.py); the in-cluster controller has no such host and
refuses it. An installed
agent's ``path`` is a host directory: ``headroom sweep --backend kubernetes`` carries it into the pod
(a ConfigMap mounted at /agent), the in-cluster controller has no host to read it from.
"""

from __future__ import annotations


def pod_agent_problem(kind: str, path: str | None, *, in_cluster: bool = False) -> str | None:
    """Why this agent cannot run as a trial pod, in one line, or None."""
    if kind in ("external", "harbor"):  # a Harbor agent runs as an external agent
        if in_cluster:
            return (
                "an external agent runs on a host beside the trial and acts through an exec channel; the "
                "controller runs trials as pods and has no such host (use kind 'command', or run it with "
                "`headroom sweep --backend kubernetes|local|docker` from a host)"
            )
        return None  # `headroom sweep --backend kubernetes` runs it on this host, over pods/exec
    if path and in_cluster:
        return (
            f"agent.path {path!r} is a directory on a host; the controller cannot read it (build the agent "
            "into the task image, or install it with agent.install)"
        )
    return None
