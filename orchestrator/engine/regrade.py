"""Re-grade a run's stored answers with another grader, without running any agent again.

The result is a new run in the same store (same plan, same facts, new verdicts),
so ``report`` and ``compare`` treat it like any other; the flips, item by item
and in each direction, make the grader change its own visible effect.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.engine.classify import classify
from orchestrator.engine.settle import apply_grader
from orchestrator.errors import SpecError, UserError
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.grader import GoldenGrader
from orchestrator.spec.provenance import RegradeRecord
from orchestrator.spec.trial import Verdict
from orchestrator.spec.unknown import first_validation_error
from orchestrator.store.sqlite import Store


@dataclass
class Flip:
    trial_id: str
    task_id: str
    before: str | None  # None: the source's final try recorded no outcome (Store.final_results)
    after: str


@dataclass
class RegradeResult:
    run_id: str
    regraded: int
    unchanged_outcomes: Counter[str] = field(default_factory=Counter)
    flips: list[Flip] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        directions = Counter(f"{f.before} -> {f.after}" for f in self.flips)
        return {
            "run_id": self.run_id,
            "regraded_trials": self.regraded,
            "flips": dict(directions),
            "items": [vars(f) for f in self.flips],
        }


def load_graders(path: Path) -> tuple[GoldenGrader | None, dict[str, GoldenGrader]]:
    """``[grader]`` for every task, and/or ``[graders.<task_id>]`` for single tasks."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read ({exc})", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"malformed TOML ({exc})", file=str(path)) from None
    try:
        default = GoldenGrader.model_validate(raw["grader"]) if "grader" in raw else None
        per_task = {tid: GoldenGrader.model_validate(g) for tid, g in (raw.get("graders") or {}).items()}
    except ValidationError as exc:
        fld, msg = first_validation_error(exc)
        raise SpecError(msg, file=str(path), field=fld) from None
    if default is None and not per_task:
        raise SpecError("expected a [grader] table or [graders.<task_id>] tables", file=str(path))
    return default, per_task


REGRADED = " (regraded)"


def source_run(store: Store, run_id: str | None) -> str:
    """The run to re-grade: RUN_ID, else the latest run that is not itself a re-grade.

    Regrading twice without a run id must grade the sweep again, not the previous re-grade.
    """
    if run_id is not None:
        return store.run(run_id).run_id
    originals = [r for r in store.runs() if "regraded_from" not in r.spec]
    return originals[-1].run_id if originals else store.run(None).run_id


def regrade(
    store: Store, run_id: str | None, default: GoldenGrader | None, per_task: dict[str, GoldenGrader], source: str
) -> RegradeResult:
    info = store.run(source_run(store, run_id))
    results = store.final_results(info.run_id)
    if not results:
        raise UserError(f"run {info.run_id} has no finished trials to re-grade")
    trials = store.planned(info.run_id)
    task_of = {t.trial_id: t.task_id for t in trials}
    unknown = sorted(set(per_task) - set(task_of.values()))
    if unknown:
        raise SpecError(f"graders for tasks not in the run: {', '.join(unknown)}", file=source)
    threshold = float(info.spec.get("reward_threshold", 1.0))
    prov = store.provenance(info.run_id)  # its tasks are the store's own: never written into the new run's row
    prov.regrade = RegradeRecord(from_run=info.run_id, grader_file=source, default=default, per_task=per_task)
    # One suffix however often a run is re-graded: the chain is in spec.regraded_from.
    new_id = store.create_run(
        name=info.name.removesuffix(REGRADED) + REGRADED,
        backend=info.backend,
        enforcement=info.enforcement,
        spec={**info.spec, "regraded_from": info.run_id},
        provenance=prov,
        tasks=store.task_specs(info.run_id),
        trials=trials,
        axis=info.axis,
    )
    out = RegradeResult(new_id, 0)
    for trial_id, outcome, reason, raw in results:
        facts = TrialFacts.from_stored(raw)  # a row of this or any earlier version
        grader = per_task.get(task_of[trial_id], default)
        verdict = classify(facts, threshold)
        if grader is not None:
            facts, verdict = apply_grader(grader, facts, verdict, threshold)
            out.regraded += 1
        before = f"{outcome}({reason})" if reason else outcome
        after = str(verdict)
        store.start_try(new_id, trial_id, 0)
        store.finish_try(new_id, trial_id, 0, facts, Verdict(verdict.outcome, verdict.reason), final=True)
        if before != after:
            out.flips.append(Flip(trial_id, task_of[trial_id], before, after))
        else:
            out.unchanged_outcomes[after] += 1
    store.set_status(new_id, "finished")
    return out
