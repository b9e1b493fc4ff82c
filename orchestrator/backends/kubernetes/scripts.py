"""The two POSIX-sh programs a trial pod runs: the runner (task container) and the warden (tests holder).

They reach the pod as files of one immutable ConfigMap per content (:func:`configmap`), mounted read-only
at :data:`MOUNT` in every container that runs one, never inlined in the pod: each pod object (and each
watch event about it) would otherwise carry the runner twice (the agent's and the verifier's container),
about 120 KB a pod, which the API server, etcd and every watch decode on each change of the pod.

The runner is generated: its phases are :data:`orchestrator.contract.phases.DEFINITION`, rendered as sh by
:mod:`.phase_sh` (up to ``stop`` in the agent's container, the rest in the verifier's), its sanitiser
the contract's ``sanitise.sh`` (with its bounds), its own fixed PATH the sanitiser's
(:data:`orchestrator.contract.sanitiser.PATH`) and its verifier environment
:mod:`orchestrator.contract.verifier_env`'s, so the Pod runs the one contract the other backends run,
never a copy of it.
"""

from __future__ import annotations

import hashlib
import shlex
from functools import cache
from importlib.resources import files
from typing import Any

from orchestrator.backends.kubernetes import phase_sh
from orchestrator.backends.kubernetes.phase_sh import agent_side, verifier_side
from orchestrator.contract import agent_check, phases, sanitiser, verifier_env

#: Where a trial pod's containers find the programs (the ``scripts`` volume, read-only).
MOUNT = "/headroom/bin"
VOLUME = "scripts"
RUNNER = "runner.sh"
WARDEN = "warden.sh"


@cache
def runner() -> str:
    text = files(__package__).joinpath("runner.sh").read_text()
    for key, value in (
        ("@PHASES@", phase_sh.render()),
        ("@AGENT_SKIPS@", " ".join(phases.ending_words(agent_side))),
        ("@BEFORE_AGENT_SKIPS@", "|".join(phase_sh.before_agent)),
        ("@AGENT_PHASES@", " ".join(p.value for p in agent_side)),
        ("@VERIFIER_PHASES@", " ".join(p.value for p in verifier_side)),
        ("@SANITISER@", shlex.quote(sanitiser.script())),
        ("@VERIFIER_ENV@", verifier_env.shell_exports()),
        ("@FIXED_PATH@", shlex.quote(sanitiser.PATH)),
        ("@SAN_MAX_LINKS@", str(sanitiser.MAX_LINKS)),
        ("@SAN_RESOLVE_S@", str(sanitiser.RESOLVE_S)),
        ("@SAN_BUDGET_S@", str(sanitiser.BUDGET_S)),
        ("@AGENT_CHECK@", shlex.quote(agent_check.SCRIPT)),
    ):
        if key not in text:
            raise RuntimeError(f"runner.sh has no {key}")  # a packaging mistake, caught by every pod test
        text = text.replace(key, value)
    return text


@cache
def warden() -> str:
    text = files(__package__).joinpath("warden.sh").read_text()
    if "@FIXED_PATH@" not in text:
        raise RuntimeError("warden.sh has no @FIXED_PATH@")
    return text.replace("@FIXED_PATH@", shlex.quote(sanitiser.PATH))


@cache
def configmap_name() -> str:
    """Named by the content: a run never mounts another version's programs, and the kubelet never has to watch it."""
    digest = hashlib.sha256(f"{runner()}\0{warden()}".encode()).hexdigest()
    return f"headroom-scripts-{digest[:40]}"


def configmap(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": configmap_name(), "labels": dict(labels)},
        "immutable": True,
        "data": {RUNNER: runner(), WARDEN: warden()},
    }


def volume() -> dict[str, Any]:
    """Read-only for every uid: the agent's container may read the programs (they are public), never change them."""
    items = [{"key": k, "path": k, "mode": 0o444} for k in (RUNNER, WARDEN)]
    return {"name": VOLUME, "configMap": {"name": configmap_name(), "items": items}}


def mount() -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": MOUNT, "readOnly": True}


def command(program: str) -> list[str]:
    """Run from the mounted file by the image's ``sh``: no kubelet ``$(VAR)`` expansion applies to a file."""
    return ["/bin/sh", f"{MOUNT}/{program}"]
