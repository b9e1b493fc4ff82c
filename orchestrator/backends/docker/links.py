"""Find the agent's symlinks into verifier-only paths, with the Engine API alone.

An agent cannot read ``/tests`` (it is copied in only after every agent process
is gone), but it can leave ``/app/answer -> /tests/expected.txt``: a dangling
link while it runs, the hidden answer once the verifier reads it. Before the
tests go in, the backend looks for such links and replaces each (see
:func:`orchestrator.backends.docker.steps.tree_archive`).

Nothing here runs inside the container, so nothing the agent changed there
(``find``, ``readlink``, a shadowed ``sh``) can hide a link:

* the daemon's ``changes`` endpoint lists every path of the container's
  writable layer: all the agent created or modified outside volumes (the
  image's own files are the task author's, not the agent's). Those in the work
  dir and ``/logs/agent`` are checked, and those under wherever a link there
  leads (one stat per path costs the daemon about a millisecond: an agent
  that installs packages elsewhere should not pay for them);
* anonymous volumes (an image ``VOLUME``) are read with the archive endpoint
  (tar headers only);
* each candidate is stat'ed with ``HEAD /containers/{id}/archive``: the daemon
  lstat's it and, for a symlink, resolves the target inside the container's
  root the way ``readlink -m`` does (every link in the chain, missing parts
  kept as written). Docker answers 200, Podman 404 for a dangling link; both
  send the stat header.

A link counts when its resolved target is in a verifier-only path (``/tests``,
``/logs/verifier``, the verifier's task copy, ``/solution`` unless the agent is
the oracle) or is an ancestor of one (``/``, ``/logs``: a verifier reading
``<link>/tests/...`` would reach the tests through it).
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import requests

from orchestrator import container_contract as cc

#: Go's os.ModeSymlink, as the archive stat header reports a file's mode.
GO_MODE_SYMLINK = 1 << 27
STAT_HEADER = "X-Docker-Container-Path-Stat"
#: Concurrent stat calls: the daemon answers each in about a millisecond.
WORKERS = 8
#: Paths listed in the evidence (the count is always complete).
LISTED = 20


def verifier_only_paths(verifier_task_dir: str, *, oracle: bool) -> tuple[str, ...]:
    return (cc.TESTS, cc.VERIFIER_LOGS, verifier_task_dir, *(() if oracle else (cc.SOLUTION,)))


def reaches(target: str, forbidden: tuple[str, ...]) -> bool:
    """True if ``target`` (absolute, resolved) is in, or is an ancestor of, a verifier-only path."""
    t = posixpath.normpath(target) if target else "/"
    t = "/" if t in ("", "//") else t
    for f in forbidden:
        if t == f or t.startswith(f + "/") or f.startswith(t.rstrip("/") + "/"):
            return True
    return False


@dataclass
class LinkScan:
    """What :func:`scan` saw: the links to replace, how many paths it looked at, those it could not stat."""

    links: list[str] = field(default_factory=list)
    paths: int = 0
    unresolved: list[str] = field(default_factory=list)

    def evidence(self) -> dict[str, Any]:
        return {"paths_checked": self.paths, "links": sorted(self.links)[:LISTED],
                "unresolved": len(self.unresolved), "unresolved_paths": sorted(self.unresolved)[:LISTED]}


def stat(api: docker.APIClient, container_id: str, path: str) -> dict[str, Any] | None:
    """The daemon's stat of ``path`` in the container (a symlink not followed, its target resolved), or None."""
    resp = api.head(api._url("/containers/{0}/archive", container_id), params={"path": path})
    raw = resp.headers.get(STAT_HEADER)
    if not raw:
        if resp.status_code == 404:
            return None
        raise docker.errors.APIError(f"stat {path}: HTTP {resp.status_code}", response=resp)
    try:
        out = json.loads(base64.b64decode(raw))
    except (binascii.Error, ValueError) as exc:
        raise docker.errors.APIError(f"stat {path}: unreadable stat header ({exc})") from None
    return out if isinstance(out, dict) else None


def _volume_paths(api: docker.APIClient, container_id: str) -> list[str]:
    """Every path inside the container's mounts (volumes are not in the writable layer's changes)."""
    out: list[str] = []
    mounts = api.inspect_container(container_id).get("Mounts") or []
    for m in mounts:
        dest = m.get("Destination")
        if not dest or dest.startswith("/dev") or dest.startswith("/etc/"):
            continue
        try:
            stream, _ = api.get_archive(container_id, dest)
        except docker.errors.NotFound:
            continue
        parent = posixpath.dirname(dest.rstrip("/")) or "/"
        with tarfile.open(fileobj=_Chunks(stream), mode="r|") as tar:
            for member in tar:  # headers only: a streamed tar skips file data
                out.append(posixpath.join(parent, member.name))
    return out


class _Chunks:
    """A file object over the archive endpoint's chunks, for tarfile's streaming mode."""

    def __init__(self, chunks: Any) -> None:
        self.it, self.buf = iter(chunks), b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self.buf) < n:
            try:
                self.buf += next(self.it)
            except StopIteration:
                break
        if n < 0:
            out, self.buf = self.buf, b""
        else:
            out, self.buf = self.buf[:n], self.buf[n:]
        return out


def _within(path: str, root: str) -> bool:
    """``path`` is ``root``, under it, or one of its ancestors (replacing an ancestor by a link moves the root)."""
    if root == "/":
        return True
    return path == root or path.startswith(root + "/") or root.startswith(path.rstrip("/") + "/")


def scan(api: docker.APIClient, container_id: str, roots: tuple[str, ...], forbidden: tuple[str, ...]) -> LinkScan:
    """The agent's links that resolve into, or above, a verifier-only path: those under ``roots`` (the work
    dir, ``/logs/agent``) and under wherever a link there leads (``/app/d -> /data``: ``/data`` too)."""
    changed = [c["Path"] for c in api.diff(container_id) or [] if c.get("Kind") in (0, 1) and c.get("Path")]
    everything = sorted(set(changed) | set(_volume_paths(api, container_id)))
    result = LinkScan()

    def check(path: str) -> tuple[str, str | None, bool]:
        try:
            st = stat(api, container_id, path)
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return path, None, False  # e.g. a link loop the daemon gives up on: the kernel cannot follow it either
        if st is None or not int(st.get("mode", 0)) & GO_MODE_SYMLINK:
            return path, None, True
        return path, str(st.get("linkTarget") or ""), True

    seen: set[str] = set()
    todo = [posixpath.normpath(r) for r in roots]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        while todo:
            batch = [p for p in everything if p not in seen and any(_within(p, r) for r in todo)]
            seen.update(batch)
            todo = []
            for path, target, ok in pool.map(check, batch):
                if not ok:
                    result.unresolved.append(path)
                elif target is not None and reaches(target, forbidden):
                    result.links.append(path)
                elif target:
                    todo.append(posixpath.normpath(target))  # what the verifier reaches through this link
    result.paths = len(seen)
    return result
