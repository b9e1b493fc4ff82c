"""The names headroom gives what it creates: DNS-1123 labels and Kubernetes label values.

A try's name is derived only from the run id, the trial id and the try number, so the same try
always has the same name: a backend can make ``submit`` idempotent on it, and a resumed run or a
restarted controller finds what it started. The engine names each try (``engine/launch.py``); the
backends, task images and the run lease read the same rules here, below all of them.
"""

from __future__ import annotations

import functools
import hashlib
import re

_NOT_DNS = re.compile(r"[^a-z0-9]+")
MAX_NAME = 63
#: The label that pins a canary try to one node (set by the engine's canary, read by the Pod backend).
CANARY_NODE_LABEL = "headroom.dev/canary-node"


def dns_label(text: str, limit: int = MAX_NAME) -> str:
    """A readable DNS-1123 label for any text: slug plus a hash of the exact text, so no two texts collide."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    slug = _NOT_DNS.sub("-", text.lower()).strip("-")
    slug = slug[: limit - len(digest) - 1].strip("-")
    return f"{slug}-{digest}" if slug else f"x-{digest}"


def launch_name(run_id: str, trial_id: str, try_index: int) -> str:
    return dns_label(f"{run_id}/{trial_id}/{try_index}")


@functools.lru_cache(maxsize=4096)  # the backend asks for the same run label on every look at a try
def label_value(text: str) -> str:
    """A Kubernetes label value (63 chars of [A-Za-z0-9._-], alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:63].strip("._-")
    return value or "none"
