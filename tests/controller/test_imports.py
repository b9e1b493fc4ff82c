"""The controller's fixed size: what building an Experiment's backend must not import.

The controller builds a Pod backend for every Experiment it reconciles, finished ones included
(their status carries the backend's cluster facts). Modules imported there stay for the
process's life, and with 100,000 Trials every MB of them counts against the chart's memory
(docs/development.md, "Controller memory with 100,000 Trials"). A finished Experiment needs none
of these: the records' readers (tarfile, sqlite3 and zstandard through the artifact sink) load at
the first harvest, the host-side agent (its sandbox, psutil) at the first external agent.

Checked in a fresh interpreter, so the test process's own imports do not hide one.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cluster.plane import REPO

NOT_AT_BUILD = (
    "sqlite3",
    "zstandard",
    "tarfile",
    "psutil",
    "orchestrator.artifacts.sink",
    "orchestrator.backends.kubernetes.records",
    "orchestrator.backends.kubernetes.external",
    "orchestrator.agents.external",
    "orchestrator.isolation",
)

PROBE = """
import json, sys
from kubernetes import client
from orchestrator.controller.main import controller  # the entry point, as `python -m orchestrator.controller`
from orchestrator.controller.backend import backend_factory
from orchestrator.controller.manager import Controller
from orchestrator.engine import faithful
from orchestrator.spec.kubernetes import KubernetesOptions

api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never reached: building sends nothing
backend = backend_factory()(api, KubernetesOptions(namespace="ns"), lambda launch, body: body)
print(json.dumps({"backend": type(backend).__name__, "modules": sorted(sys.modules)}))
"""


def test_building_the_controllers_backend_loads_no_records_or_host_agent_modules() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["backend"] == "KubernetesBackend"
    loaded = set(got["modules"])
    assert "orchestrator.backends.kubernetes.backend" in loaded and "orchestrator.controller.reconcile" in loaded
    assert sorted(m for m in NOT_AT_BUILD if m in loaded) == []
