"""Refuse an image that reaches a path of the verifier's container through a link.

The verifier's container mounts the carried volumes (the agent's work) and gets the hand-over
(``/tests``, the verifier's logs and task copy) after the agent has written those volumes. The
runtime resolves each mount point and upload path inside the container, following links, so a
path whose image form passes through a link into a carried folder (``/data -> /app/data`` with
``/data/out`` declared as an output and ``/app`` the work dir) is resolved through what the agent
left there: the agent re-points ``/app/data/out`` and its volume is mounted over the verifier's
Python (seen on dockerd 20.10: ``/usr/lib/python3.11`` replaced, the verifier's ``python3`` dead).
A path with no link on its way is resolved by its components alone, so the image is checked once:
every component of every such path, in a container of the image with nothing mounted (Podman
answers for a volume's mount point from the volume) that never starts.

The image's own ``VOLUME`` folders are mounted in the verifier's container too (fresh anonymous
volumes): one inside a carried folder would be resolved through the agent's files with no link of
the image's at all, and one around it would hide it, so such an image is refused as well
(:func:`volume_problem`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import docker
from docker import utils as docker_utils

from orchestrator.contract import carry

#: Go's ``os.ModeSymlink``, the bit the archive endpoint's stat sets in ``mode`` for a link (dockerd and Podman alike;
#: Podman's ``linkTarget`` names the resolved path of every entry, a link or not).
MODE_SYMLINK = 1 << 27


def link_target(api: docker.APIClient, container_id: str, path: str) -> str | None:
    """Where ``path`` leads if the container's own entry at it is a link (the archive endpoint's stat, which does
    not follow its last component); None for anything else or nothing."""
    res = api.head(api._url("/containers/{0}/archive", container_id), params={"path": path})
    encoded = res.headers.get("x-docker-container-path-stat")
    if res.status_code == 404 and not encoded:
        return None
    if res.status_code != 404:  # Podman answers a link to nothing with 404 and the link's stat
        api._raise_for_status(res)
    stat: dict[str, Any] = docker_utils.decode_json_header(encoded) if encoded else {}
    if not int(stat.get("mode") or 0) & MODE_SYMLINK:
        return None
    return str(stat.get("linkTarget") or "?")


def volume_problem(image_volumes: Iterable[str], carried: Iterable[str]) -> str | None:
    """Why an image's ``VOLUME`` folders cannot stand beside the carried ones, or None."""
    for v in image_volumes:
        for c in carried:
            if carry.overlaps(v.rstrip("/") or "/", c):
                return (
                    f"the image declares VOLUME {v}, which overlaps the carried folder {c}: the verifier's container "
                    "would mount it through (or over) what the agent left"
                )
    return None


def first_link(api: docker.APIClient, container_id: str, paths: Iterable[str]) -> str | None:
    """Why the container cannot be trusted with ``paths``: the first component of one that is a link; None if none
    is."""
    seen: set[str] = set()
    for path in paths:
        for c in carry.components(path):
            if c in seen:
                continue
            seen.add(c)
            if (target := link_target(api, container_id, c)) is not None:
                return (
                    f"the image makes {c} a link (to {target}), on the way to {path}: the verifier's container "
                    "would resolve that path through what the agent left, which the agent could point anywhere in "
                    "the verifier's system"
                )
    return None
