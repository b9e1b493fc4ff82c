"""Golden-set graders: a declarative verifier in ``task.toml``'s ``[grader]`` table.

The agent reports its answer as ``"answer"`` in ``$HEADROOM_AGENT_RESULT`` (the
same JSON file that carries tokens and cost, which every backend brings back).
The grader then decides, with no script to run:

* ``must`` / ``must_not``: regular expressions that must all / must none match;
* ``exact``: the answer equals this text after trimming whitespace;
* ``numeric``: the answer is a number within ``tolerance`` of ``value``;
* ``json_schema``: the answer is JSON valid under this schema;
* ``allow_abstain`` with ``abstain_patterns``: an answer matching one of them is
  an honest "cannot answer", recorded as its own category (``abstained``), not as
  a plain failure.

Every check that is set must hold for a pass.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_ABSTAIN = [
    r"(?i)\b(i (do not|don't) know|cannot (be )?answer(ed)?|unable to answer|insufficient information)\b"
]


class NumericCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: float = Field(allow_inf_nan=False)
    tolerance: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class GoldenGrader(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["golden"] = "golden"
    must: list[str] = Field(default_factory=list)
    must_not: list[str] = Field(default_factory=list)
    exact: str | None = None
    numeric: NumericCheck | None = None
    json_schema: dict[str, Any] | None = None
    allow_abstain: bool = False
    abstain_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_ABSTAIN))

    @field_validator("must", "must_not", "abstain_patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"bad regular expression {p!r}: {exc}") from None
        return patterns
