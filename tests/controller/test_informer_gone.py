"""The informer relists after 410 Gone.

The API server here is a stand-in (a function returning canned watch streams): a fresh test
plane replays old revisions instead of answering 410, so a real one cannot be made to send
it on demand. Everything else about the informer is tested against the real API server in
tests/cluster/test_controller_informer.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

from orchestrator.controller.metrics import Metrics
from orchestrator.kube.watch import Informer


class _Stream:
    def __init__(
        self, lines: list[dict[str, Any]] | None = None, data: dict[str, Any] | None = None, status: int = 200
    ) -> None:
        self.status = status
        self.data = json.dumps(data).encode() if data is not None else b""
        self._lines = lines or []

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        for line in self._lines:
            yield (json.dumps(line) + "\n").encode()

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


def test_relists_after_gone_and_after_a_gone_status_response() -> None:
    calls: list[dict[str, Any]] = []
    script = [
        _Stream(data={"metadata": {"resourceVersion": "10"}, "items": [_obj("a", "9")]}),  # list
        _Stream(
            [
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
                {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "code": 410,
                        "reason": "Expired",
                        "message": "too old resource version: 12 (15)",
                    },
                },
            ]
        ),  # watch
        _Stream(data={"metadata": {"resourceVersion": "20"}, "items": [_obj("b", "19")]}),  # relist: a is gone
        _Stream(status=410, data={"kind": "Status", "code": 410, "reason": "Gone"}),  # watch refused outright
        _Stream(data={"metadata": {"resourceVersion": "30"}, "items": [_obj("b", "19"), _obj("c", "29")]}),
    ]

    def list_fn(**kw: Any) -> _Stream:
        calls.append(kw)
        if script:
            return script.pop(0)
        time.sleep(0.05)
        return _Stream([])

    events: list[tuple[str, str]] = []
    metrics = Metrics()
    inf = Informer("thing", list_fn, handler=lambda k, o: events.append((k, o["metadata"]["name"])), metrics=metrics)
    inf.start()
    deadline = time.monotonic() + 10
    while (inf.relists < 3 or inf.get("c") is None) and time.monotonic() < deadline:
        time.sleep(0.05)
    inf.stop()
    assert inf.relists == 3
    assert sorted(o["metadata"]["name"] for o in inf.items()) == ["b", "c"]
    assert ("DELETED", "a") in events and ("ADDED", "b") in events and ("ADDED", "c") in events
    assert events.count(("ADDED", "b")) == 1  # unchanged at the second relist: no event
    watches = [c for c in calls if c.get("watch")]
    assert watches[0]["resource_version"] == "10" and watches[0]["allow_watch_bookmarks"] is True
    assert watches[1]["resource_version"] == "20"  # after the relist, never the stale 12 of the bookmark
    assert metrics.watch_restarts.labels("thing", "gone")._value.get() == 2
    assert inf.bookmarks == 1
