"""Grade an answer against a golden grader: a pure function, used when a try settles and by ``regrade``."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from orchestrator.agentio import safejson
from orchestrator.spec.grader import GoldenGrader


@dataclass(frozen=True)
class Grade:
    reward: float | None  # None: no answer to grade
    abstained: bool = False
    checks: dict[str, bool] = field(default_factory=dict)
    #: Why a check failed on the answer itself (unparseable, too deep, ...): evidence, not an error.
    notes: dict[str, str] = field(default_factory=dict)


def grade(grader: GoldenGrader, answer: Any) -> Grade:
    if not isinstance(answer, str):
        return Grade(None)
    text = answer.strip()
    if grader.allow_abstain and any(re.search(p, text) for p in grader.abstain_patterns):
        return Grade(0.0, abstained=True)
    checks: dict[str, bool] = {}
    notes: dict[str, str] = {}
    if grader.must:
        checks["must"] = all(re.search(p, text) for p in grader.must)
    if grader.must_not:
        checks["must_not"] = not any(re.search(p, text) for p in grader.must_not)
    if grader.exact is not None:
        checks["exact"] = text == grader.exact.strip()
    if grader.numeric is not None:
        try:
            value = float(text)
            checks["numeric"] = math.isfinite(value) and abs(value - grader.numeric.value) <= grader.numeric.tolerance
        except ValueError:
            checks["numeric"] = False
    if grader.json_schema is not None:
        # Imported here: only a json_schema grader needs it, and every process that settles tries (the
        # long-running controller among them) would otherwise hold its ~3 MB of validators.
        import jsonschema

        try:
            jsonschema.validate(safejson.loads(text), grader.json_schema)
            checks["json_schema"] = True
        except (ValueError, jsonschema.ValidationError, jsonschema.SchemaError) as exc:
            checks["json_schema"] = False
            notes["json_schema"] = str(getattr(exc, "message", exc))[:300]
        except RecursionError:  # a schema validating a (depth-bounded) answer still recursed too far
            checks["json_schema"] = False
            notes["json_schema"] = "the answer nests too deep to validate"
    return Grade(1.0 if checks and all(checks.values()) else 0.0, checks=checks, notes=notes)
