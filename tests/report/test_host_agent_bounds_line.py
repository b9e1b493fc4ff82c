"""The isolation line of a run with a host-side (external) agent names the bounds its sandbox applied, from the run's
provenance (orchestrator/report/document.py): the mechanism this host enforced each by, never a recorded string
it did not make itself."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.report import summary
from orchestrator.report.document import isolation_facts
from orchestrator.spec.provenance import read_stored


def _line(bounds: object) -> str:
    """The line from a stored row (read as the store reads it: typed, or refused)."""
    prov = read_stored({"agent_sandbox": {"sandboxed": True, "trusted": False, "tool": "bubblewrap", "bounds": bounds}})
    return summary.host_agent(isolation_facts(prov)["agent_sandbox"])


def test_the_line_names_what_a_cgroup_applied() -> None:
    bounds = {"memory_mb": 192, "pids": 64, "disk_mb": 16, "enforcement": "cgroup-v2", "applied": {}}
    assert _line(bounds) == (
        "; host agent in its own sandbox (bubblewrap: memory 192 MiB by cgroup v2, 64 processes by cgroup v2, "
        "HOME, /tmp, /dev/shm and logs dir each a tmpfs of 16 MiB at most)"
    )


def test_without_a_cgroup_the_line_names_the_rlimits() -> None:
    bounds = {"memory_mb": 4096, "pids": 1024, "disk_mb": 1024, "enforcement": "rlimit", "applied": {}}
    line = _line(bounds)
    assert "memory 4096 MiB by RLIMIT_DATA" in line and "1024 processes by RLIMIT_NPROC (per uid)" in line


def test_a_run_that_recorded_no_mechanisms_or_an_edited_store_shows_nothing_it_did_not_make() -> None:
    assert _line({"memory_mb": 1, "pids": 2, "disk_mb": 3}) == "; host agent in its own sandbox (bubblewrap)"
    hostile = {
        "memory_mb": "<img src=x onerror=alert(1)>",
        "pids": True,
        "disk_mb": None,
        "enforcement": "<script>alert(1)</script>",
        "applied": {},
    }
    with pytest.raises(ValidationError):  # a number the store holds as markup is refused, never shown
        _line(hostile)
    line = _line({**hostile, "memory_mb": None, "pids": None})
    assert "<" not in line and "memory unrecorded" in line and "processes unrecorded" in line, line
