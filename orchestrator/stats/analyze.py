"""The single entry point from trial rows to a JSON-ready statistics report.

``analyze(df)`` reduces the rows once (``aggregate``) and then computes, per
configuration, the rates with Wilson intervals, clustered SEs, pass@k/pass^k,
run-to-run spread, cluster-level scores and cost per solved task; a per-task
table; paired comparisons (each configuration vs the reference and between
neighbours) with Holm adjustment over the whole family; trend tests; the
minimum detectable difference; and the calibration recommendation.

headroom's headline score: ``score_infra_as_failure`` (passes / all trials), because
that is leaderboard practice and what a reader of a published number assumes (the report
names the run's headline rule once, in ``headline_rule``: an import's is its source's own). The
other view, ``score_infra_excluded``, drops infra and harness errors from the
denominator (passes / (passed + failed + timeout + abstained)): those outcomes
say nothing about the agent (see orchestrator.spec.outcome.MODEL_OUTCOMES).

Abstentions (an honest "cannot answer" a golden grader allows) are their own
outcome. They stay in both scores' denominators, because an abstention is not a
pass; ``abstention_rate`` (abstained / all trials, Wilson interval) reports them
per configuration, so "did not answer" is never hidden inside "answered wrong".

When the configurations are labels (agents, models, imported submissions:
``axis="labels"``) rather than resource levels, they keep the given order, each
is compared with the reference only (the first label unless named), and there
is no trend test and no calibration: neither means anything without a resource
axis.

Two families of paired tests, each Holm-adjusted on its own: the *conditional*
family (sign test, CMH on both scores, the exact infra test: given these tasks)
and the *population* family (the paired t-test over tasks: would the gap hold on
new tasks?). Keeping them apart leaves each family's adjustment unchanged by the
other.

``compare_runs(df_a, df_b)`` compares two runs (different agents or models)
on the tasks and configurations both hold, paired by task, with the same tests
and intervals; every figure it returns is computed on those shared tasks only.

Each returns a typed model (:mod:`orchestrator.spec.analysis`: :class:`Analysis`, :class:`RunComparison`,
:class:`ScoringRules`), validated here, where it is made: a figure without a declared field fails at its
producer. Its numbers are plain JSON types (NaN/inf -> None), so its JSON dump always works.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.errors import NothingToCompare
from orchestrator.spec.analysis import SCHEMA, Analysis, RunComparison, ScoringRules

from . import calibration, power, scoring_rules
from .aggregate import (
    ABSTAINED,
    HARNESS,
    INFRA,
    MODEL_COLUMNS,
    OUTCOMES,
    PASSED,
    TIMEOUT,
    Aggregates,
    aggregate,
)
from .clustered import THESE_TASKS, clustered_se, icc_anova, new_tasks_interval
from .clusters import cluster_scores
from .cost import cost_latency
from .drift import drift_check
from .multiplicity import holm
from .paired import BOSCHLOO_GATE_HIGH, BOSCHLOO_MAX_CELLS, cmh_test, task_paired, two_rate_exact
from .passk import pass_curves
from .proportions import wilson
from .spread import spread_from_counts
from .trend import clustered_trend, cochran_armitage
from .usage_intervals import usage_intervals

DEFAULT_REFERENCE = "1x-strict"


def jsonable(x: Any) -> Any:
    """Recursively convert to plain JSON types; NaN/inf -> None."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else None
    if x is None or isinstance(x, str):
        return x
    if hasattr(x, "to_dict"):
        return jsonable(x.to_dict())
    return str(x)


def _lim(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def _reference_index(agg: Aggregates, reference: str | None, axis: str = "resources") -> int:
    if reference is not None:
        if reference not in agg.labels:
            raise ValueError(f"reference configuration {reference!r} not in data: {agg.labels}")
        return agg.labels.index(reference)
    if axis == "resources" and DEFAULT_REFERENCE in agg.labels:
        return agg.labels.index(DEFAULT_REFERENCE)
    return 0


def _config_block(agg: Aggregates, c: int) -> dict[str, Any]:
    cnt = agg.counts[c]  # (T, N_OUTCOMES)
    tot = cnt.sum(axis=0)
    n_t = cnt.sum(axis=1)
    pass_t = cnt[:, PASSED]
    n = int(tot.sum())
    passed = int(tot[PASSED])
    model_n = int(tot[list(MODEL_COLUMNS)].sum())
    ran = n_t > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        task_rate = np.where(ran, pass_t / np.maximum(n_t, 1), np.nan)
    score = wilson(passed, n)
    se = clustered_se(pass_t, n_t)
    at, hat = pass_curves(n_t, pass_t)
    cost = cost_latency(
        n,
        passed,
        float(agg.duration_sum[c]),
        float(agg.cost_sum[c]),
        int(agg.cost_n[c]),
        float(agg.tok_in_sum[c]),
        int(agg.tok_in_n[c]),
        float(agg.tok_out_sum[c]),
        int(agg.tok_out_n[c]),
        passed_with_cost=int(agg.cost_pass_n[c]),
        tokens_sum=float(agg.tok_sum[c]),
        n_tokens=int(agg.tok_n[c]),
        passed_with_tokens=int(agg.tok_pass_n[c]),
        n_cost_gateway=int(agg.cost_gw_n[c]) if agg.cost_gw_n is not None else 0,
        n_tokens_gateway=int(agg.tok_gw_n[c]) if agg.tok_gw_n is not None else 0,
    ).to_dict()
    if int(agg.duration_n[c]) == 0:  # no trial recorded a duration: latency is unknown, not zero
        cost.update(latency_total_s=None, latency_per_attempt_s=None, latency_per_solved_s=None)
    return {
        "label": agg.labels[c],
        "request_multiplier": float(agg.request[c]),
        "limit_multiplier": _lim(agg.limit[c]),
        "n": n,
        "n_tasks": int(ran.sum()),
        "attempts_per_task_min": int(n_t[ran].min()) if ran.any() else 0,
        "attempts_per_task_max": int(n_t[ran].max()) if ran.any() else 0,
        "counts": {o: int(tot[i]) for i, o in enumerate(OUTCOMES)},
        "infra_reasons": dict(sorted(agg.reasons[c].items())),
        "pass_rate": score.to_dict(),
        "infra_error_rate": wilson(int(tot[INFRA]), n).to_dict(),
        "timeout_rate": wilson(int(tot[TIMEOUT]), n).to_dict(),
        "harness_error_rate": wilson(int(tot[HARNESS]), n).to_dict(),
        "abstention_rate": wilson(int(tot[ABSTAINED]), n).to_dict(),
        "score_infra_as_failure": score.to_dict(),
        # headroom's score twice, one interval per question: Wilson over these tasks' trials, t over tasks for new ones.
        "score_intervals": {
            "these_tasks": {**score.to_dict(), "method": "Wilson 95% over trials", "generalises_to": THESE_TASKS},
            "new_tasks": new_tasks_interval(pass_t, n_t),
        },
        "score_infra_excluded": wilson(passed, model_n).to_dict(),
        "se": se.to_dict(),
        "icc_infra": icc_anova(cnt[:, INFRA], n_t),
        "pass_at_k": at,
        "pass_hat_k": hat,
        "spread": spread_from_counts(
            agg.run_pass[c] if agg.run_pass is not None else agg.attempt_pass[c],
            agg.run_n[c] if agg.run_n is not None else agg.attempt_n[c],
            basis=agg.run_basis,
        ).to_dict(),
        "clusters": cluster_scores(task_rate, agg.task_cluster, agg.clusters).to_dict(),
        "cost": cost,
    }


def _task_table(agg: Aggregates) -> list[dict[str, Any]]:
    cnt = agg.counts  # (C, T, N_OUTCOMES)
    n = cnt.sum(axis=2)
    p = cnt[:, :, PASSED]
    inf = cnt[:, :, INFRA]
    abst = cnt[:, :, ABSTAINED]
    tmo = cnt[:, :, TIMEOUT]
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(n > 0, p / np.maximum(n, 1), np.nan)
    rows = []
    for t, tid in enumerate(agg.tasks):
        per = {}
        for c, lab in enumerate(agg.labels):
            if n[c, t] == 0:
                continue
            per[lab] = {
                "n": int(n[c, t]),
                "passed": int(p[c, t]),
                "pass_rate": float(rate[c, t]),
                "infra_errors": int(inf[c, t]),
                "abstained": int(abst[c, t]),
                "timeouts": int(tmo[c, t]),  # a count beside the others, so the heatmap can mark them
                "peak_memory_bytes_max": agg.peak_bytes_max[c, t],
                "peak_memory_to_limit_max": agg.peak_ratio_max[c, t],
                "peak_memory_to_limit_mean": agg.peak_ratio_mean[c, t],
            }
        rows.append({"task_id": tid, "cluster_id": agg.clusters[agg.task_cluster[t]], "configs": per})
    return rows


HOLM_ALPHA = 0.05  # the level the comparisons' Holm family is read at


def _compare_cells(
    label_a: str,
    label_b: str,
    cnt_a: np.ndarray,
    cnt_b: np.ndarray,
    boschloo_max_cells: int,
    boschloo_between: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One paired comparison from aligned (T, N_OUTCOMES) count arrays (B relative to A)."""
    na, nb = cnt_a.sum(axis=1), cnt_b.sum(axis=1)
    pa, pb = cnt_a[:, PASSED], cnt_b[:, PASSED]
    sa, sb = wilson(int(pa.sum()), int(na.sum())), wilson(int(pb.sum()), int(nb.sum()))
    tp = task_paired(pa, na, pb, nb).to_dict()
    sign = tp.pop("sign")
    cmh = cmh_test(pa, na, pb, nb).to_dict()
    infra = two_rate_exact(
        int(cnt_a[:, INFRA].sum()),
        int(na.sum()),
        int(cnt_b[:, INFRA].sum()),
        int(nb.sum()),
        boschloo_max_cells,
        boschloo_between,
    ).to_dict()
    infra["a"] = wilson(infra["x_a"], infra["n_a"]).to_dict()
    infra["b"] = wilson(infra["x_b"], infra["n_b"]).to_dict()
    diff = None if sa.estimate is None or sb.estimate is None else sb.estimate - sa.estimate
    # The agent's score where the infrastructure held: infra and harness errors leave the denominator.
    ma = cnt_a[:, list(MODEL_COLUMNS)].sum(axis=1)
    mb = cnt_b[:, list(MODEL_COLUMNS)].sum(axis=1)
    xa, xb = wilson(int(pa.sum()), int(ma.sum())), wilson(int(pb.sum()), int(mb.sum()))
    xdiff = None if xa.estimate is None or xb.estimate is None else xb.estimate - xa.estimate
    return {
        "a": label_a,
        "b": label_b,
        "score": {"a": sa.to_dict(), "b": sb.to_dict(), "diff": diff, "paired": tp, "sign": sign, "cmh": cmh},
        "score_infra_excluded": {
            "a": xa.to_dict(),
            "b": xb.to_dict(),
            "diff": xdiff,
            "cmh": cmh_test(pa, ma, pb, mb).to_dict(),
        },
        "infra": infra,
    }


def _apply_holm(comparisons: list[dict[str, Any]]) -> int:
    """Holm over every conditional test in the list (sign, both CMHs, infra per comparison), and
    separately over the population tests (paired t over tasks). Returns the conditional family's size."""
    slots = []
    for comp in comparisons:
        slots += [comp["score"]["sign"], comp["score"]["cmh"], comp["score_infra_excluded"]["cmh"], comp["infra"]]
    adj = holm([s["p"] for s in slots])
    for s, a in zip(slots, adj):
        s["p_holm"] = a
    pop = [comp["score"]["paired"] for comp in comparisons if comp["score"]["paired"].get("t_p") is not None]
    for s, a in zip(pop, holm([s["t_p"] for s in pop]) if pop else []):
        s["t_p_holm"] = a
    return len(slots)


def _pairs(n_configs: int, ref: int, neighbours: bool = True) -> list[tuple[int, int, list[str]]]:
    pairs: dict[frozenset[int], tuple[int, int, list[str]]] = {}
    for c in range(n_configs):
        if c != ref:
            pairs[frozenset((ref, c))] = (ref, c, ["vs_reference"])
    for c in range(n_configs - 1 if neighbours else 0):
        key = frozenset((c, c + 1))
        if key in pairs:
            pairs[key][2].append("neighbours")
        else:
            pairs[key] = (c, c + 1, ["neighbours"])
    return list(pairs.values())


def _mdd_block(block: dict[str, Any]) -> dict[str, Any]:
    """MDD at the reference configuration, two ways.

    ``conditional`` treats trials as independent given the task set.
    ``with_design_effect`` inflates n by 1 + (m - 1) * icc: the noise
    level when the question is about the *population* of tasks (would the gap
    hold on a fresh task sample?), which is what a leaderboard reader asks.
    """
    n = block["n"]
    base = block["score_infra_as_failure"]["estimate"] or 0.0
    icc = block["se"]["icc"] or 0.0
    cond = power.mdd(n, base)
    clus = power.mdd(n, base, n_tasks=block["n_tasks"], icc=icc)
    excl = block["score_infra_excluded"]
    cond_excl = power.mdd(excl["n"], excl["estimate"] or 0.0) if excl["n"] else None
    return {
        "config": block["label"],
        "primary": "conditional",
        "conditional": cond.to_dict(),
        "with_design_effect": clus.to_dict(),
        "mdd": cond.mdd,
        "mdd_up": cond.mdd_up,
        "mdd_down": cond.mdd_down,
        "mdd_with_design_effect": clus.mdd,
        "infra_excluded": None if cond_excl is None else cond_excl.to_dict(),
        "note": "two-sample arcsine (Cohen h) power via statsmodels NormalIndPower, 80% power, two-sided "
        "alpha 0.05, for two INDEPENDENT samples: 'conditional' treats trials as independent given these tasks; "
        "'with_design_effect' uses 1 + (m - 1) * icc (reference config's intra-task correlation): two independent "
        "samples of new tasks. Both are upper bounds for the paired tests of this report; the calibration applies "
        "its own paired MDD (calibration.mdd_applied)",
    }


def analyze(
    df: pd.DataFrame,
    reference: str | None = None,
    *,
    boschloo_max_cells: int = BOSCHLOO_MAX_CELLS,
    margin: float = calibration.MARGIN,
    min_tasks: int = 10,
    min_attempts: int = 2,
    axis: str = "resources",
    config_order: list[str] | None = None,
) -> Analysis:
    """Full statistics report for one run (see module docstring)."""
    labels_axis = axis == "labels"
    agg = aggregate(df, config_order if labels_axis else None)
    ref = _reference_index(agg, reference, axis)
    blocks = [_config_block(agg, c) for c in range(agg.n_configs)]

    comparisons = []
    pairs = _pairs(agg.n_configs, ref, neighbours=not labels_axis)
    # Boschloo only where it can change a decision: between the family's first Holm level (4 tests a pair) and
    # the Fisher p above which it never reached 0.05 (paired.BOSCHLOO_GATE_HIGH).
    gate = (HOLM_ALPHA / max(1, 4 * len(pairs)), BOSCHLOO_GATE_HIGH)
    for a, b, kinds in pairs:
        comp = _compare_cells(agg.labels[a], agg.labels[b], agg.counts[a], agg.counts[b], boschloo_max_cells, gate)
        comp["kinds"] = kinds
        comparisons.append(comp)
    family = _apply_holm(comparisons)

    mdd = _mdd_block(blocks[ref])
    if labels_axis:
        not_applicable = "not applicable: the configurations are labels (agents, models, imports), not resource levels"
        out = _result(df, agg, ref, blocks, comparisons, family, mdd, None, None)
        out["trends_note"] = out["calibration_note"] = not_applicable
        return Analysis.model_validate(jsonable(out))

    # A task-band arm (sorted last) is each task at its own band, not a point on the multiplier
    # axis: it stays out of the trend and is no calibration candidate.
    n_axis = sum(1 for lab in agg.labels if lab != "task-band")
    n_axis = n_axis if ref < n_axis else agg.n_configs
    axis_counts = agg.counts[:n_axis]
    cells_n = axis_counts.sum(axis=2)  # (C, T)
    rank = np.repeat(np.arange(n_axis), agg.n_tasks)
    task = np.tile(np.arange(agg.n_tasks), n_axis)
    totals = axis_counts.sum(axis=1)  # (C, N_OUTCOMES)
    n_c = totals.sum(axis=1)
    trends: dict[str, Any] = {"primary": "clustered", "score": "config rank in canonical order (0 = least headroom)"}
    for name, col in (("pass", PASSED), ("infra_error", INFRA)):
        trends[name] = {
            "cochran_armitage": cochran_armitage(totals[:, col], n_c).to_dict(),
            "clustered": clustered_trend(axis_counts[:, :, col].ravel(), cells_n.ravel(), rank, task).to_dict(),
        }

    calib = calibration.recommend(
        blocks[:n_axis], ref, axis_counts, margin=margin, min_tasks=min_tasks, min_attempts=min_attempts
    )
    return Analysis.model_validate(jsonable(_result(df, agg, ref, blocks, comparisons, family, mdd, trends, calib)))


def _result(
    df: pd.DataFrame,
    agg: Aggregates,
    ref: int,
    blocks: list[dict[str, Any]],
    comparisons: list[dict[str, Any]],
    family: int,
    mdd: dict[str, Any],
    trends: dict[str, Any] | None,
    calib: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "axis": "resources" if trends is not None else "labels",
        "reference": agg.labels[ref],
        "n_trials": int(len(df)),
        "n_tasks": agg.n_tasks,
        "n_clusters": len(agg.clusters),
        "config_order": agg.labels,
        "configs": blocks,
        "tasks": _task_table(agg),
        "comparisons": {
            "adjustment": "holm",
            "family_size": family,
            "family": "every sign, CMH (both scores) and infra test in this list",
            "population_family": "the paired t-tests over tasks (score.paired.t_p), Holm-adjusted among themselves",
            "items": comparisons,
        },
        "trends": trends,
        "mdd": mdd,
        "calibration": calib,
        "drift": drift_check(df),
        "notes": agg.notes,
    }


def _align(agg: Aggregates, c: int, tasks: list[str]) -> np.ndarray:
    """(len(tasks), N_OUTCOMES) counts of config c of agg, row i being task ``tasks[i]``.

    WHY a gather by name: scattering agg's rows into the shared list
    (``out[tasks.get_indexer(agg.tasks)] = ...``) sends every task the list lacks
    to index -1, i.e. onto the last shared task. Looking each shared task up in
    agg instead cannot misplace a row, and a task agg lacks is an error here, not
    a silent zero: callers pass only tasks both runs hold.
    """
    idx = pd.Index(agg.tasks).get_indexer(tasks)
    if np.any(idx < 0):
        missing = [t for t, i in zip(tasks, idx) if i < 0]
        raise ValueError(f"_align: tasks not in this run: {missing[:5]}")
    return agg.counts[c][idx]


def _shared_tasks_only(df: pd.DataFrame, tasks: list[str]) -> pd.DataFrame:
    return df[df["task_id"].astype(str).isin(tasks)]


def compare_runs(
    df_a: pd.DataFrame,
    df_b: pd.DataFrame,
    *,
    name_a: str = "a",
    name_b: str = "b",
    boschloo_max_cells: int = BOSCHLOO_MAX_CELLS,
    order_a: list[str] | None = None,
    order_b: list[str] | None = None,
) -> RunComparison:
    """Paired comparison of two runs (e.g. two agents) on the tasks both ran.

    ``order_a`` / ``order_b``: a labels-axis run's configurations in the user's order.

    Everything is computed on the shared tasks only: both runs' frames are cut
    to the tasks they have in common before anything is aggregated, so the
    per-config blocks, the MDD, the scores shown beside B - A and the paired
    tests all describe the same trials. Within one compared pair of
    configurations, a task is used only when both configurations ran it
    (``n_tasks`` of the comparison). Tasks present in only one run are listed in
    ``tasks_only_in``; ``n_trials`` keeps each run's full size.

    Configurations are matched by label; if the runs share no label but each
    has exactly one configuration, those two are compared. Raises
    NothingToCompare when the runs share no task or no configuration.
    """
    tasks_a, tasks_b = set(df_a["task_id"].astype(str)), set(df_b["task_id"].astype(str))
    tasks = sorted(tasks_a & tasks_b)
    only_a, only_b = sorted(tasks_a - tasks_b), sorted(tasks_b - tasks_a)
    if not tasks:
        raise NothingToCompare(f"the runs share no task ({name_a} has {_few(only_a)}; {name_b} has {_few(only_b)})")
    sub_a, sub_b = _shared_tasks_only(df_a, tasks), _shared_tasks_only(df_b, tasks)
    ga, gb = aggregate(sub_a, order_a), aggregate(sub_b, order_b)
    shared = [lab for lab in ga.labels if lab in gb.labels]
    pairs = [(ga.labels.index(lab), gb.labels.index(lab)) for lab in shared]
    notes = []
    if not pairs and ga.n_configs == 1 and gb.n_configs == 1:
        pairs = [(0, 0)]
        notes.append(f"no shared configuration label; compared {ga.labels[0]!r} with {gb.labels[0]!r}")
    if not pairs:
        raise NothingToCompare(
            f"the runs share no configuration on their {len(tasks)} shared task(s) "
            f"({name_a} has {_few(ga.labels)}; {name_b} has {_few(gb.labels)})"
        )
    comparisons: list[dict[str, Any]] = []
    compared: list[int] = []  # A's configuration index of each comparison
    for ca, cb in pairs:
        xa, xb = _align(ga, ca, tasks), _align(gb, cb, tasks)
        both = (xa.sum(axis=1) > 0) & (xb.sum(axis=1) > 0)  # a task one side never ran pairs with nothing
        if not both.any():
            notes.append(f"{ga.labels[ca]!r} and {gb.labels[cb]!r} ran no task in common: not compared")
            continue
        comp = _compare_cells(
            f"{name_a}:{ga.labels[ca]}",
            f"{name_b}:{gb.labels[cb]}",
            xa[both],
            xb[both],
            boschloo_max_cells,
            (HOLM_ALPHA / max(1, 4 * len(pairs)), BOSCHLOO_GATE_HIGH),
        )
        comp["n_tasks"] = int(both.sum())
        comparisons.append(comp)
        compared.append(ca)
    if not comparisons:
        raise NothingToCompare(
            "no configuration of one run ran any task in common with the same configuration of the other"
        )
    family = _apply_holm(comparisons)
    blocks_a = [_config_block(ga, c) for c in range(ga.n_configs)]
    blocks_b = [_config_block(gb, c) for c in range(gb.n_configs)]
    for blocks, sub in ((blocks_a, sub_a), (blocks_b, sub_b)):  # what users compare: cost and tokens, with intervals
        for block in blocks:
            block["cost"].update(usage_intervals(sub, block["label"]).to_dict())
    mdd = _mdd_block(blocks_a[compared[0]])
    out = {
        "schema": SCHEMA,
        "shared_tasks": len(tasks),
        "basis": f"every figure is computed on the {len(tasks)} task(s) both runs hold and on configurations both "
        "runs have; n_trials counts each whole run",
        "runs": {
            name_a: {"n_trials": int(len(df_a)), "n_trials_shared_tasks": int(len(sub_a)), "configs": blocks_a},
            name_b: {"n_trials": int(len(df_b)), "n_trials_shared_tasks": int(len(sub_b)), "configs": blocks_b},
        },
        "tasks_only_in": {name_a: only_a, name_b: only_b},
        "comparisons": {"adjustment": "holm", "family_size": family, "items": comparisons},
        "mdd": mdd,
        "notes": notes,
    }
    return RunComparison.model_validate(jsonable(out))


def _few(names: list[str], k: int = 5) -> str:
    """'a, b, c and 4 more' -- a one-line error must stay one line."""
    if not names:
        return "none"
    head = ", ".join(names[:k])
    return head + (f" and {len(names) - k} more" if len(names) > k else "")


def scoring_rules_block(
    df: pd.DataFrame,
    rules: list[str],
    *,
    config_order: list[str] | None = None,
    default_rule: str | None = None,
    reward_threshold: float = 1.0,
) -> ScoringRules:
    """The run under named scoring rules, side by side (orchestrator.stats.scoring_rules).

    Kept beside :func:`analyze` (the report document puts it under ``statistics.scoring_rules``, and its
    ``default`` is the document's ``headline_rule``): every rule labels what its interval or stderr
    generalises to.
    """
    return ScoringRules.model_validate(
        jsonable(
            scoring_rules.evaluate(
                df, rules, config_order=config_order, default=default_rule, threshold=reward_threshold
            )
        )
    )
