"""What of the agent's environment reaches the verifier on a container backend: the carried outputs.

On a container backend the verifier does not run in the container the agent left: a root
agent there owns the interpreter, its site-packages, ``PATH`` and the shell (a
``sitecustomize.py``, a ``.pth`` file, an entry-point plugin, a ``python3`` earlier on
``PATH``, a replaced ``/bin/sh`` all used to grade the agent's answer as it liked). The
verifier runs from the task's pristine image instead, and only the agent's *outputs* are
carried over to it, through the sanitiser:

* the work dir (the image's WORKDIR; :data:`FALLBACK_WORKDIR` when the image sets none, since
  a work dir of ``/`` would carry the whole system with it);
* ``/logs/agent``;
* the folders the task declares in ``[verifier] outputs`` (for a task whose answer lives
  outside the work dir: a service's data folder, say).

A carried path is a folder that is neither the system (:data:`SYSTEM`) nor headroom's own
(:data:`CONTRACT`), nor under or above one of them: carrying ``/usr`` would carry the plants.
:func:`problem` says why a path cannot be carried; the task loader refuses such a declaration
and a backend refuses such a WORKDIR before the try starts. docs/container-contract.md has
the trade-offs of the mechanism each backend uses.
"""

from __future__ import annotations

import posixpath
from typing import Final

from orchestrator.contract import paths as cc

#: The work dir of an image that sets no WORKDIR (Terminal-Bench 2 images use it).
FALLBACK_WORKDIR: Final = "/app"
#: Folders of the system: what the verifier runs comes from there, so none is ever carried from the agent.
SYSTEM: Final = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/boot",
    "/proc",
    "/sys",
    "/dev",
)
#: headroom's own paths in the environment: the hand-over files, the tests, the reward.
CONTRACT: Final = (cc.LOGS, cc.TESTS, cc.SOLUTION, "/headroom")


def overlaps(a: str, b: str) -> bool:
    """One path is the other or inside it."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def components(path: str) -> list[str]:
    """Each folder on the way to an absolute ``path``, then the path: ``/a/b/c`` -> ``/a``, ``/a/b``, ``/a/b/c``."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def problem(path: str) -> str | None:
    """Why ``path`` cannot be carried to the verifier, or None."""
    if not path.startswith("/"):
        return f"{path!r} is not an absolute path"
    if posixpath.normpath(path) != path or path.startswith("//"):
        return f"{path!r} is not a normal path (no '..', '.', '//' or trailing '/')"
    if path == "/":
        return "'/' is the whole system"
    for s in SYSTEM:
        if overlaps(path, s):
            return f"{path!r} overlaps the system folder {s}: the verifier would run what the agent installed"
    for c in CONTRACT:
        if overlaps(path, c):
            return f"{path!r} overlaps headroom's own {c}"
    return None


def workdir(image_workdir: str | None) -> str:
    """The try's work dir: the image's WORKDIR, or :data:`FALLBACK_WORKDIR` when it sets none (or ``/``)."""
    w = (image_workdir or "").rstrip("/")
    return w or FALLBACK_WORKDIR


def roots(work: str, declared: list[str]) -> list[str]:
    """Every carried folder, outermost only: the work dir, the agent's logs, the declared outputs (a folder
    inside another carried one goes with it)."""
    wanted = [work, cc.AGENT_LOGS, *declared]
    out: list[str] = []
    for p in sorted(set(wanted), key=len):
        if not any(overlaps(p, q) for q in out):
            out.append(p)
    return sorted(out, key=wanted.index)


def declared(task_toml: bytes) -> list[str]:
    """The task's ``[verifier] outputs`` (the loader has refused a task whose list :func:`problem` rejects)."""
    import tomllib

    raw = tomllib.loads(task_toml.decode("utf-8"))
    outputs = (raw.get("verifier") or {}).get("outputs") or []
    return [p for p in outputs if isinstance(p, str) and problem(p) is None]
