"""Remove headroom's finalizer from an object, and nothing else.

Other controllers put their own finalizers on the same pods (Kueue's ``kueue.x-k8s.io/managed``
on every pod it queues); replacing the list would drop theirs. The removal is a JSON patch that
first ``test``s that position ``i`` still holds ours, then ``remove``s position ``i``: if the list
changed meanwhile, the server refuses the patch (422) instead of removing someone else's entry,
and the object is read again and the patch rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

Patch = list[dict[str, Any]]
ATTEMPTS = 5


def removal(finalizers: list[str] | None, finalizer: str) -> Patch:
    """The JSON patch removing ``finalizer`` from ``finalizers`` (empty when it is not there)."""
    if not finalizers or finalizer not in finalizers:
        return []
    i = finalizers.index(finalizer)
    return [
        {"op": "test", "path": f"/metadata/finalizers/{i}", "value": finalizer},
        {"op": "remove", "path": f"/metadata/finalizers/{i}"},
    ]


def release(
    finalizer: str,
    read: Callable[[], dict[str, Any]],
    patch: Callable[[Patch], Any],
    *,
    known: dict[str, Any] | None = None,
    also: Patch | None = None,
) -> bool:
    """Remove ``finalizer`` (and apply ``also`` in the same patch); False when the object is gone.

    ``known`` is the object as last seen (an informer's cache): when it is current, the release
    is one PATCH; when it is stale, the ``test`` fails and the object is read once more.
    """
    current = known
    for attempt in range(ATTEMPTS):
        try:
            if current is None:
                current = read()
            ops = removal((current.get("metadata") or {}).get("finalizers"), finalizer) + list(also or [])
            if not ops:
                return True
            patch(ops)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            if exc.status in (409, 422) and attempt + 1 < ATTEMPTS:  # the list changed since it was read
                current = None
                continue
            raise
    raise AssertionError("unreachable: the last attempt returns or raises")
