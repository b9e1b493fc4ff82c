"""Verdicts headroom inferred from an imported source's traces, kept apart from those it observed.

An import reads a Harbor trial whose agent step was SIGKILLed and that then scored 0 as
``infra_error(suspected_oom)`` (:mod:`orchestrator.importers.sigkill`): a suspicion, not an observation. The
report says how many trials that is per configuration and shows the score both ways: with those trials as
failures (as the source scored them) and as infra errors (left out of the score). Every other verdict in the
report is what the source recorded or headroom observed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from orchestrator.spec.outcome import InfraReason

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.report.model import ReportDocument

INFERRED_REASONS = (InfraReason.SUSPECTED_OOM.value,)
TITLE = "Inferred, not observed (imported traces)"


class InferredConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    reason: str
    trials: int  # trials read this way
    n: int  # all trials of the configuration
    passed: int
    score_as_failures: float  # passed / n: the trials counted as the source scored them
    score_as_infra_errors: float | None  # passed / (n - trials): the trials left out as infra errors


class Inferred(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str
    configs: list[InferredConfig]


def build(df: pd.DataFrame) -> Inferred | None:
    """Per configuration holding inferred verdicts: how many, and the score both ways (None: there are none)."""
    if df.empty or "reason" not in df:
        return None
    configs = []
    for label, rows in df.groupby("config_label", sort=False, observed=True):
        for reason in INFERRED_REASONS:
            k = int(((rows["outcome"] == "infra_error") & (rows["reason"] == reason)).sum())
            if not k:
                continue
            n, passed = len(rows), int((rows["outcome"] == "passed").sum())
            configs.append(
                InferredConfig(
                    label=str(label),
                    reason=reason,
                    trials=k,
                    n=n,
                    passed=passed,
                    score_as_failures=passed / n,
                    score_as_infra_errors=passed / (n - k) if n > k else None,
                )
            )
    if not configs:
        return None
    return Inferred(
        note="infra_error(suspected_oom): the agent step was SIGKILLed (exit 137 or the shell's 'Killed' in the "
        "agent's log) and the source then scored the trial a failure without another exception; SIGKILL alone does "
        "not prove an OOM kill, so headroom infers it from the source's files (each trial's evidence names them) "
        "and shows the score both ways",
        configs=configs,
    )


def lines(doc: ReportDocument) -> list[str]:
    """One line per configuration with inferred verdicts (empty when there are none)."""
    inf = doc.inferred
    if inf is None:
        return []
    out = [f"{TITLE}: {inf.note}."]
    for c in inf.configs:
        excl = "—" if c.score_as_infra_errors is None else f"{100 * c.score_as_infra_errors:.1f}%"
        out.append(
            f"  {c.label}: {c.trials} of {c.n} trials infra_error({c.reason}), inferred; score with them as "
            f"failures {100 * c.score_as_failures:.1f}% ({c.passed}/{c.n}), as infra errors {excl} "
            f"({c.passed}/{c.n - c.trials})"
        )
    return out


def markdown(doc: ReportDocument) -> list[str]:
    body = lines(doc)
    if not body:
        return []
    return [f"## {TITLE}", "", body[0], ""] + [f"- {line.strip()}" for line in body[1:]] + [""]
