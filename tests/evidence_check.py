"""The one evidence schema every backend fills: a row (or a try's facts) checked against the JSON Schema
that ``orchestrator.spec.facts.evidence_schema`` prints, with an independent validator (jsonschema)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import jsonschema

from orchestrator.spec.facts import TrialFacts, evidence_schema


@cache
def _validator() -> jsonschema.Draft202012Validator:
    schema = evidence_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def assert_fits_schema(row: TrialFacts | Mapping[str, Any]) -> None:
    """``row``: a try's facts, or an evidence row as the store returns it (its ``try`` key is the store's)."""
    data = json.loads(row.model_dump_json()) if isinstance(row, TrialFacts) else dict(row)
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{'.'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:5]]
