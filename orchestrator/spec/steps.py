"""One step (agent or verifier) of a trial, as a backend observed it.

Its own module so the typed evidence (:mod:`orchestrator.spec.evidence`, which keeps an external
agent's runner phase as a step) and the trial facts (:mod:`orchestrator.spec.facts`) can both use it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class StepFacts(BaseModel):
    """One step (agent or verifier) of a trial."""

    name: str
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    oom_kills: int = 0
    oom_evidence: str | None = Field(default=None, description="where the OOM verdict came from")
    duration_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    spawn_error: str | None = None
    # Container backends: the termination reason and message the runtime gave.
    termination_reason: str | None = None
    skipped: str | None = Field(default=None, description="why the step did not run at all (then it took no time)")
