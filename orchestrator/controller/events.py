"""Kubernetes Events on an Experiment for milestones and failures.

Each event has a deterministic name (``key``), so a controller that restarts and takes
the same decision again does not record the same milestone twice.
"""

from __future__ import annotations

import hashlib
from typing import Any

import structlog

from orchestrator.controller.progress import now_rfc3339
from orchestrator.controller.resources import API_VERSION
from orchestrator.kube.api import ApiException, client
from orchestrator.kube.raw import CoreJson

log = structlog.get_logger("headroom.events")
COMPONENT = "headroom-controller"


class EventRecorder:
    def __init__(self, core: client.CoreV1Api, namespace: str, instance: str) -> None:
        self.core = core
        self.namespace = namespace
        self.instance = instance

    def record(self, obj: dict[str, Any], type_: str, reason: str, message: str, *, key: str) -> None:
        meta = obj["metadata"]
        name = f"{meta['name'][:200]}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        now = now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", API_VERSION),
                "kind": obj.get("kind", "Experiment"),
                "name": meta["name"],
                "namespace": self.namespace,
                "uid": meta["uid"],
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": f"headroom.dev/{COMPONENT}",
            "reportingInstance": self.instance[:128],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            CoreJson(self.core.api_client).create_event(self.namespace, body)  # JSON: no typed core API (kube/raw.py)
        except ApiException as exc:
            if exc.status != 409:  # 409: this milestone was already recorded (before a restart)
                log.warning("event not recorded", reason=reason, status=exc.status)
