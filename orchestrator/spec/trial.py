"""A planned trial and the verdict that settles it: the engine's two small value types."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from orchestrator.spec.outcome import Outcome, Reason
from orchestrator.spec.resources import ResourceConfig


class Trial(BaseModel):
    """One (task, configuration, attempt) of a plan. Its tries are executions of it."""

    model_config = ConfigDict(frozen=True)

    trial_id: str
    task_id: str
    config: ResourceConfig
    attempt: int
    seed: int
    order: int


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: Reason | None = None

    def __str__(self) -> str:
        return f"{self.outcome.value}({self.reason.value})" if self.reason else self.outcome.value
