"""A backend's facts are one typed record: what it returns, what a run keeps, and what reports read back,
whichever version of headroom wrote it (the old flat dicts below are the shape main wrote before)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchestrator.backends.local.backend import LocalBackend
from orchestrator.engine import overcommit
from orchestrator.report import checks, document
from orchestrator.spec.backend import BackendAbilities, BackendFacts
from orchestrator.spec.provenance import Provenance, read_stored
from orchestrator.view import data

#: What the local backend recorded before BackendFacts (flat: host, capabilities, enforcement, its sandbox).
OLD_LOCAL: dict[str, Any] = {
    "hostname": "box",
    "kernel": "6.1.0",
    "os": "Linux-6.1.0-x86_64",
    "cpu_model": "Some CPU",
    "cpu_count": 8,
    "memory_bytes": 16 << 30,
    "python": "3.11.9",
    "enforcement": "cgroup-v2",
    "capabilities": {
        "memory_limit": True,
        "memory_request": True,
        "cpu_quota": True,
        "cpu_request": True,
        "storage_limit": True,
        "isolation": "namespaces",
        "network_control": True,
        "gpus": False,
        "architectures": ["amd64"],
        "skips_verifier": True,
        "oom_signal": "cgroup-v2 oom_kill counter",
        "notes": [],
    },
    "isolation": {"tool": "bubblewrap", "bwrap": "/usr/bin/bwrap", "seccomp": {"filter": "x"}},
    "cgroup_version": "v2",
    "cgroup_parent": "/sys/fs/cgroup/headroom-1",
    "trial_pids_max": 4096,
}

#: The kubernetes backend's, cluster facts flat beside the capabilities.
OLD_KUBERNETES: dict[str, Any] = {
    "namespace": "bench",
    "server_version": {"git_version": "v1.31.0", "platform": "linux/amd64"},
    "nodes": [{"name": "n1", "architecture": "arm64", "allocatable": {"memory": "8Gi", "cpu": "4"}, "dropped": 1}],
    "other_workloads": "not readable (403 Forbidden)",
    "runtime_class": None,
    "resource_quotas": [{"name": "three-pods", "hard": {"pods": "3"}}],
    "limit_ranges": "not readable (403 Forbidden)",
    "pod_security": {"profile": "restricted", "run_as_root": False, "namespace_labels": {}},
    "enforcement": "kubernetes",
    "capabilities": {**OLD_LOCAL["capabilities"], "isolation": "pod", "skips_verifier": False},
    "options": {"namespace": "bench"},
    "fit_check": {"checked": True},
}

#: The docker backend's: the daemon's host flat, its own facts under "docker", a key this version dropped.
OLD_DOCKER: dict[str, Any] = {
    "hostname": "daemon",
    "kernel": "6.8.0",
    "memory_bytes": 8 << 30,
    "enforcement": "docker",
    "capabilities": {**OLD_LOCAL["capabilities"], "isolation": "container", "some_old_flag": True},
    "cgroup_version": "cgroup-v2",
    "docker": {"engine": "docker", "server_version": "26.1", "components": ["Engine 26.1"], "gone": 1},
    "orchestrator_host": {"hostname": "laptop", "memory_bytes": 4 << 30},
}


def test_old_flat_local_provenance_reads_into_its_blocks() -> None:
    got = BackendFacts.from_stored(OLD_LOCAL)
    assert got.name == "local" and got.abilities is not None
    assert got.abilities.enforcement == "cgroup-v2" and got.abilities.isolation == "namespaces"
    assert got.abilities.cpu_quota and got.abilities.skips_verifier
    assert got.host is not None and (got.host.kernel, got.host.cgroup_version) == ("6.1.0", "v2")
    assert got.local is not None and got.local.sandbox["tool"] == "bubblewrap"
    assert got.local.cgroup == {"cgroup_parent": "/sys/fs/cgroup/headroom-1"} and got.local.trial_pids_max == 4096
    assert got.legacy == {}
    # what the reports read of it
    assert document.isolation_facts(read_stored({"backend": OLD_LOCAL}))["isolation"] == "namespaces"
    assert data.isolation_of(read_stored({"backend": OLD_LOCAL})) == "namespaces"
    assert overcommit.capacity_of(got) == 16 << 30


def test_old_flat_kubernetes_provenance_reads_into_its_cluster() -> None:
    got = BackendFacts.from_stored(OLD_KUBERNETES)
    assert got.name == "kubernetes" and got.host is None and got.abilities is not None
    assert got.abilities.isolation == "pod" and got.abilities.enforcement == "kubernetes"
    cluster = got.kubernetes
    assert cluster is not None and cluster.namespace == "bench" and cluster.fit_check == {"checked": True}
    assert cluster.limit_ranges == "not readable (403 Forbidden)"
    assert overcommit.node_capacities(got) == {"n1": 8 << 30}
    assert checks._cluster(read_stored({"backend": OLD_KUBERNETES})) == cluster
    assert got.legacy == {"nodes.0.dropped": 1}  # a node key this version has no field for: kept aside
    assert overcommit.capacity_of(got) is None  # a cluster's memory is per node


def test_old_docker_provenance_keeps_what_this_version_has_no_field_for() -> None:
    got = BackendFacts.from_stored(OLD_DOCKER)
    assert got.name == "docker" and got.docker is not None and got.docker.server_version == "26.1"
    assert got.host is not None and got.host.hostname == "daemon"
    assert got.orchestrator_host is not None and got.orchestrator_host.hostname == "laptop"
    assert got.legacy == {"capabilities.some_old_flag": True, "docker.gone": 1}


@pytest.mark.parametrize(
    "stored",
    [None, {}, "text", {"kernel": "6.1"}, {"error": "ApiException: 500"}, {"capabilities": {"isolation": "??"}}],
)
def test_any_stored_shape_reads_and_never_fails_a_report(stored: Any) -> None:
    got = BackendFacts.from_stored(stored)
    assert got.abilities is None
    assert document.isolation_facts(read_stored({"backend": stored}))["isolation"] == "unrecorded"
    if isinstance(stored, dict) and stored:
        assert got.legacy or got.host  # nothing recorded is dropped


def test_a_run_keeps_the_facts_its_backend_returned_and_reads_them_back() -> None:
    with LocalBackend(enforcement="rlimit", isolation="none") as backend:
        facts = backend.facts()
        # the class declares the best case; this instance narrowed it to what it gives
        assert LocalBackend.abilities.cpu_quota and not backend.abilities.cpu_quota
        assert facts.abilities == backend.abilities and facts.abilities.enforcement == "rlimit"
        assert facts.local is not None and facts.local.enforcement_fallback_reason == "rlimit enforcement requested"
        assert BackendFacts.from_stored(facts.model_dump(mode="json")) == facts


class _Forcing(LocalBackend):
    """The local backend told it may force a cleanup: nothing else changes, the declaration is read."""

    abilities = LocalBackend.abilities.model_copy(update={"force_cleanup": True})


def test_force_cleanup_is_read_from_the_declaration() -> None:
    with _Forcing(enforcement="rlimit", isolation="none") as backend:
        backend.cleanup(None, force=True)  # declared: no refusal
    with LocalBackend(enforcement="rlimit", isolation="none") as backend, pytest.raises(ValueError, match="cannot"):
        backend.cleanup(None, force=True)


def test_undeclared_is_not_had() -> None:
    nothing = BackendAbilities()
    assert not any(v for k, v in nothing.model_dump().items() if isinstance(v, bool))
    assert nothing.isolation == "none" and nothing.enforced() == []


def test_a_report_reads_a_store_written_before_backend_facts(tmp_path: Path) -> None:
    """A run whose provenance holds the old flat record: the report reads its isolation and host from it."""
    from orchestrator.report import markdown
    from orchestrator.spec.experiment import Experiment
    from orchestrator.store.sqlite import Store

    old = {**OLD_LOCAL, "enforcement_fallback_reason": None}
    spec = Experiment(tasks_dir=str(tmp_path), configurations=["1x"]).model_dump(mode="json")
    with Store(tmp_path / "h.db") as store:
        run_id = store.create_run(
            name="old",
            backend="local",
            enforcement="cgroup-v2",
            spec=spec,
            provenance=Provenance(),
            tasks=[],
            trials=[],
        )
    # the row as a version before typed backend facts wrote it
    db = sqlite3.connect(tmp_path / "h.db")
    with db:
        db.execute("UPDATE provenance SET json = ? WHERE run_id = ?", (json.dumps({"backend": old}), run_id))
    db.close()
    with Store(tmp_path / "h.db") as store:
        doc = document.build(store, run_id)
    assert doc.run.isolation == "namespaces" and doc.host.kernel == "6.1.0"
    assert doc.provenance.backend is not None and doc.provenance.backend.local is not None
    assert "kernel 6.1.0" in markdown.host_line(doc.host, doc.provenance.backend.local)
    assert doc.to_dict()["provenance"]["backend"]["abilities"]["isolation"] == "namespaces"


def test_the_flags_are_recorded_in_one_order_whatever_the_hash_seed() -> None:
    """A set's iteration order follows PYTHONHASHSEED; a bundle's published report is re-derived in another process,
    so the stored list must not depend on it (runs verify saw '--enforcement' against '--run-on-host')."""
    from orchestrator.spec.backend import BackendAbilities

    dumped = BackendAbilities(flags=frozenset({"--run-on-host", "--enforcement", "--build"})).model_dump(mode="json")
    assert dumped["flags"] == ["--build", "--enforcement", "--run-on-host"]
