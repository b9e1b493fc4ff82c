"""The report's statistical sections, composed from what the statistics return.

The figures are :mod:`orchestrator.spec.analysis`'s models, as :mod:`orchestrator.stats.analyze` produces them;
a section here adds only what the report puts beside them (the named scoring rules) and takes the produced
models as they are: a field is declared once, where the statistics declare it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from orchestrator.spec.analysis import Analysis, AnalysisFigures, Block, RunComparison, ScoringRules


class Statistics(AnalysisFigures):
    """``analyze``'s result without its configurations (they are the document's), plus the named scoring rules."""

    scoring_rules: ScoringRules | None = None

    @classmethod
    def of(cls, analysis: Analysis, scoring_rules: ScoringRules | None, **replaced: Any) -> Statistics:
        """The section from the analysis' own models (not copies), with ``replaced`` fields (the report's checks
        may refuse the calibration, and add local times to the drift)."""
        return cls(**{**analysis.figures(), **replaced}, scoring_rules=scoring_rules)


class ComparisonRules(Block):
    """Each run under the named rules, on the tasks both hold."""

    basis: str
    requested: list[str]
    default: dict[str, str]  # each run's headline rule, by side (A, B)
    A: ScoringRules
    B: ScoringRules


class ComparisonStatistics(RunComparison):
    """``compare_runs``' result, plus the named rules."""

    scoring_rules: ComparisonRules | None = None

    @classmethod
    def of(cls, comparison: RunComparison, scoring_rules: ComparisonRules) -> ComparisonStatistics:
        return cls(**comparison.figures(), scoring_rules=scoring_rules)


def dump(model: BaseModel) -> dict[str, Any]:
    """A block as the JSON report writes it."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)
