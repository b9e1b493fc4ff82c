"""The calibration recommendation: which memory limit a benchmark should publish.

WHY: a task's resource spec used as both floor and ceiling ("1x strict") kills
trials on transient memory spikes -- infrastructure errors, not model failures.
Raising the ceiling removes those, but too much headroom starts to change what
is measured (agents that need big dependencies succeed only with generous
limits). The question a maintainer asks is "which limit do we publish?", and
the rule below is built for that question alone.

Every candidate (a configuration with more headroom than the reference, by
default "1x-strict") is compared with the reference only, on the tests the
decision uses, each family with its own multiplicity control:

* **infra family** -- does the candidate remove infra errors? One-sided exact
  conditional test stratified by task (stats.stratified: the exact form of the
  Cochran-Mantel-Haenszel test) of "fewer infra errors than the reference";
  Holm over the candidates' infra tests only. A task whose infra state does not
  change between the two limits carries no weight, so a few tasks with too low a
  spec (OOM-killed on every attempt at both) cannot hide the others' reduction,
  as they did in the pooled test this replaced.
* **score-change family** -- does the candidate change what the agent achieves?
  Paired t-test over tasks (scipy) on the infra-excluded score (passes among
  the trials the infrastructure let finish: under the headline every removed
  infra error raises the score by construction); Holm over the candidates.
  A task with no finished trial on one side scores 0 there -- its headline
  score -- so a task that finishes only with more memory counts as a change by
  its pass rate there; it is never left out of the question.
  A significant change that TOST also shows to be inside the margin is not a
  change that matters and does not count.
* **equivalence** -- is the candidate shown *not* to change the score? TOST
  (statsmodels ``ttost_paired``, paired by task) against +-``margin``
  (default 4 points, ``headroom report --margin``), required twice (the larger
  p): on every task as above, and on the tasks finished at both limits; so a
  task that finishes only at one limit can take equivalence away, never give
  it. An intersection-union test: no adjustment is needed to require it of
  several candidates.

Decision (``recommended_label``; stats.rule, the same code the per-task bands use):

1. No infra error in any configuration: the strict limit suffices.
2. A candidate is *eligible* when its infra reduction is significant (Holm), its
   score is shown equivalent (TOST), and it comes before the first candidate
   whose score changes significantly.
3. The first eligible candidate is chosen. A larger eligible candidate replaces
   it only if it has significantly fewer infra errors than the one chosen (the
   same stratified exact test; a fixed-sequence procedure, each step at alpha,
   the first failure stops): "the smallest limit that removes the removable
   infra errors and is shown to measure the same thing".
4. No eligible candidate: publish the reference, with the reason (no tested
   limit reduces infra errors; or only limits that change the score, or whose
   score is not shown unchanged, do).

Why equivalence for every published limit, the first included: a limit that
changes the score by a few points removes infra errors as well as one that does
not, and at 89 tasks x 5 attempts a +5-point change is found by the paired t in
well under half the sweeps; publishing on "no change found" published it.
TOST bounds that: a limit whose true change is at least the margin is shown
equivalent in at most alpha of sweeps.

A generous limit is never chosen because equivalence *could not* be shown:
when the larger limits are neither shown equivalent nor shown to change the
score, the summary says so in one line with the 95% interval and the attempts
per task that would settle it (80% TOST power if the true change were 0,
assuming the per-task noise shrinks as 1/attempts).

``mdd`` per candidate is the paired minimum detectable difference of the score
test (paired t over tasks at the Holm first-step level alpha/K, 80% power,
noncentral-t approximation via the t quantiles). ``mdd_applied`` is the
published candidate's; when the reference is published, the first candidate's
(the score test any step up had to pass first).

It REFUSES (status "refused") only when the data cannot carry the rule: no
reference, no candidate, fewer than ``min_tasks`` tasks or ``min_attempts``
attempts per task.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.weightstats import ttost_paired

from .aggregate import INFRA, MODEL_COLUMNS, PASSED
from .multiplicity import holm
from .rule import decide
from .stratified import fewer_events

ALPHA = 0.05
MARGIN = 0.04
POWER = 0.80
SCORE_TEST = (
    "paired t-test over tasks, infra-excluded score; a task with no finished trial on one side scores 0 there "
    "(its headline score), so a task that finishes only at one limit counts as a change"
)


def _pts(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f} pts"


def _infra_test(cnt_a: np.ndarray, cnt_b: np.ndarray) -> dict[str, Any]:
    """One-sided test of "fewer infra errors under B than under A", exact and stratified by task.

    Each task is its own stratum: a task whose infra state does not change (errors on every trial at both
    limits, or none) carries no weight, so a few tasks with too low a spec cannot hide the others' reduction.
    """
    r = fewer_events(cnt_a[:, INFRA], cnt_a.sum(axis=1), cnt_b[:, INFRA], cnt_b.sum(axis=1))
    return {"p": r.p, "method": r.method, "strata_used": r.strata_used}


def task_scores(cnt_a: np.ndarray, cnt_b: np.ndarray) -> dict[str, Any]:
    """Per-task scores of A and B for the paired tests (B - A).

    Every task with a finished trial on either side is kept. A side where the infrastructure let no trial
    finish (infra errors there, nothing finished) scores 0 (its infra-as-failure score: what the headline publishes for it), so a task that only
    finishes with more memory is a change by its pass rate there, never a task left out. ``both`` marks the
    tasks finished on both sides (the plain infra-excluded comparison).
    """
    ma, mb = cnt_a[:, list(MODEL_COLUMNS)].sum(axis=1), cnt_b[:, list(MODEL_COLUMNS)].sum(axis=1)
    # A side scores 0 only where the infrastructure killed its trials; a task with no trial at all on a side
    # (an interrupted or imported run) or only harness errors there says nothing about the limit: left out.
    seen_a, seen_b = (ma > 0) | (cnt_a[:, INFRA] > 0), (mb > 0) | (cnt_b[:, INFRA] > 0)
    keep = seen_a & seen_b & ((ma > 0) | (mb > 0))
    ra = np.where(ma > 0, cnt_a[:, PASSED] / np.maximum(ma, 1), 0.0)[keep]
    rb = np.where(mb > 0, cnt_b[:, PASSED] / np.maximum(mb, 1), 0.0)[keep]
    both = ((ma > 0) & (mb > 0))[keep]
    na, nb = cnt_a.sum(axis=1)[keep], cnt_b.sum(axis=1)[keep]
    m = float(np.mean((na + nb) / 2)) if keep.any() else 0.0
    return {
        "ra": ra,
        "rb": rb,
        "both": both,
        "mean_attempts": m,
        "only_b": int((keep & (ma == 0)).sum()),
        "only_a": int((keep & (mb == 0)).sum()),
    }


def _tost(ra: np.ndarray, rb: np.ndarray, margin: float) -> float | None:
    if len(ra) < 2:
        return None
    d = rb - ra
    if float(d.std(ddof=1)) == 0:  # every task moved by the same amount
        return 0.0 if abs(float(d.mean())) < margin else 1.0
    return float(ttost_paired(rb, ra, -margin, margin)[0])


def score_tests(cnt_a: np.ndarray, cnt_b: np.ndarray, margin: float, alpha: float, k: int) -> dict[str, Any]:
    """Paired-by-task score change (t-test), equivalence (TOST) and the paired MDD (B - A).

    Equivalence must hold twice (an intersection-union test, p the larger): on every task, with a side
    where nothing finished scored 0, and on the tasks finished on both sides. A task that finishes only at
    one limit can then only take equivalence away, never give it.
    """
    ts = task_scores(cnt_a, cnt_b)
    ra, rb = ts["ra"], ts["rb"]
    t = len(ra)
    out: dict[str, Any] = {
        "n_tasks": t,
        "mean_attempts": ts["mean_attempts"],
        "only_b": ts["only_b"],
        "only_a": ts["only_a"],
        "diff": None,
        "se": None,
        "low95": None,
        "high95": None,
        "change_p": None,
        "tost_p": None,
        "mdd": None,
        "margin": margin,
    }
    if t < 2:
        return out
    d = rb - ra
    diff, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(t))
    q = float(stats.t.ppf(0.975, t - 1))
    out.update(diff=diff, se=se, low95=diff - q * se, high95=diff + q * se)
    tost = [_tost(ra, rb, margin)]
    if not ts["both"].all():
        tost.append(_tost(ra[ts["both"]], rb[ts["both"]], margin))
    out["tost_p"] = None if any(p is None for p in tost) else max(p for p in tost if p is not None)
    level = alpha / max(1, k)  # Holm's first step: the level the smallest p must reach
    if se == 0:
        out.update(change_p=1.0 if diff == 0 else 0.0, mdd=0.0)
        return out
    out["change_p"] = float(stats.ttest_rel(rb, ra).pvalue)
    out["mdd"] = (float(stats.t.ppf(1 - level / 2, t - 1)) + float(stats.t.ppf(POWER, t - 1))) * se
    return out


def attempts_to_settle(se: float | None, mean_attempts: float, margin: float, alpha: float = ALPHA) -> int | None:
    """Attempts per task giving TOST 80% power at a true change of 0 (noise shrinking as 1/attempts)."""
    if se is None or se <= 0 or mean_attempts <= 0:
        return None
    se_needed = margin / (stats.norm.ppf(1 - alpha) + stats.norm.ppf(1 - (1 - POWER) / 2))
    return max(1, math.ceil(mean_attempts * (se / se_needed) ** 2))


def recommend(
    configs: list[dict[str, Any]],
    ref: int | None,
    counts: np.ndarray,
    *,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    min_tasks: int = 10,
    min_attempts: int = 2,
) -> dict[str, Any]:
    """The recommendation dict (see the module docstring). ``counts`` is (C, T, N_OUTCOMES) for ``configs``."""
    base: dict[str, Any] = {
        "rule": "headroom.calibration/3",
        "alpha": alpha,
        "margin": margin,
        "evidence": [],
        "reasons": [],
        "recommended_label": None,
        "recommended_limit_multiplier": None,
        "score_changes_at_label": None,
        "settled": None,
        "summary": None,
    }
    if ref is None:
        return {**base, "status": "refused", "reasons": ["reference configuration not present"]}
    ref_cfg = configs[ref]
    cand = list(range(ref + 1, len(configs)))
    reasons = []
    if not cand:
        reasons.append("no configuration with more headroom than the reference")
    if ref_cfg["n_tasks"] < min_tasks:
        reasons.append(f"too few tasks: {ref_cfg['n_tasks']} < {min_tasks}")
    if ref_cfg["attempts_per_task_min"] < min_attempts:
        reasons.append(f"too few attempts per task: {ref_cfg['attempts_per_task_min']} < {min_attempts}")
    base["reference"] = ref_cfg["label"]
    if reasons:
        return {**base, "status": "refused", "reasons": reasons}

    k = len(cand)
    c_ref = counts[ref]
    infra = [_infra_test(c_ref, counts[c]) for c in cand]
    infra_holm = holm([i["p"] for i in infra])
    score = [score_tests(c_ref, counts[c], margin, alpha, k) for c in cand]
    change_holm = holm([s["change_p"] for s in score])
    evidence = []
    for c, inf, ih, sc, ch in zip(cand, infra, infra_holm, score, change_holm):
        cfg = configs[c]
        evidence.append(
            {
                "label": cfg["label"],
                "limit_multiplier": cfg["limit_multiplier"],
                "request_multiplier": cfg["request_multiplier"],
                "infra_error_rate": cfg["infra_error_rate"],
                "score": cfg["score_infra_excluded"],
                "score_basis": "score_infra_excluded",
                "headline_score": cfg["score_infra_as_failure"],
                "headline_diff_vs_reference": _diff(cfg["score_infra_as_failure"], ref_cfg["score_infra_as_failure"]),
                "infra_test": inf["method"],
                "infra_p": inf["p"],
                "infra_p_holm": ih,
                "infra_reduced": bool(ih is not None and ih < alpha),
                "infra_tasks_weighted": inf["strata_used"],
                "score_diff_vs_reference": sc["diff"],
                "score_diff_generalises_to": "new tasks (t interval over tasks)",
                "score_diff_low95": sc["low95"],
                "score_diff_high95": sc["high95"],
                "score_test": SCORE_TEST,
                "score_change_p": sc["change_p"],
                # A significant change inside the margin (TOST also rejects) is a change too small to matter.
                "score_change_p_holm": ch,
                "score_changed": bool(
                    ch is not None and ch < alpha and not (sc["tost_p"] is not None and sc["tost_p"] < alpha)
                ),
                "equivalence_test": f"TOST paired by task, margin ±{100 * margin:g} pts, on every task and on the "
                "tasks finished at both limits (the larger p)",
                "tost_p": sc["tost_p"],
                "equivalent": bool(sc["tost_p"] is not None and sc["tost_p"] < alpha),
                "tasks_finished_only_here": sc["only_b"],
                "tasks_finished_only_at_reference": sc["only_a"],
                "mdd": sc["mdd"],
                "mdd_label": f"paired MDD of the score test (t over {sc['n_tasks']} tasks, 80% power, "
                f"two-sided alpha {alpha / k:.3g} = Holm first step; tasks are the sampling unit, so it "
                "generalises to new tasks)",
                "n_tasks_paired": sc["n_tasks"],
                "_se": sc["se"],
                "_m": sc["mean_attempts"],
            }
        )
    total_infra = int(counts[:, :, INFRA].sum())
    steps: list[dict[str, Any]] = []
    if total_infra:
        d = decide(
            [e["infra_reduced"] for e in evidence],
            [e["equivalent"] for e in evidence],
            [e["score_changed"] for e in evidence],
            [True] * k,
            lambda i, j: _infra_test(counts[cand[i]], counts[cand[j]])["p"],
            alpha,
        )
        chosen, change_i = d.chosen, d.change_at
        steps = [{"from": evidence[i]["label"], "to": evidence[j]["label"], "p": p} for i, j, p in d.steps]
    else:
        chosen, change_i = None, next((i for i, e in enumerate(evidence) if e["score_changed"]), None)
    out = {
        **base,
        "status": "recommended",
        "infra_family": f"Holm over the {k} candidates' one-sided infra tests (exact, stratified by task)",
        "score_family": f"Holm over the {k} candidates' paired score tests",
        "score_changes_at_label": evidence[change_i]["label"] if change_i is not None else None,
    }
    out["infra_steps"] = steps
    for e in evidence:
        e["reading"] = _reading(e)
    if chosen is None:
        label, mult = ref_cfg["label"], ref_cfg["limit_multiplier"]
        why = _why_reference(evidence, change_i, total_infra, margin)
    else:
        e = evidence[chosen]
        label, mult = e["label"], e["limit_multiplier"]
        why = (
            f"infra errors {_rate(ref_cfg['infra_error_rate'])} at {ref_cfg['label']} -> {_rate(e['infra_error_rate'])} "
            f"(one-sided exact test stratified by task, Holm p {e['infra_p_holm']:.3g}), score shown unchanged "
            f"(TOST p {e['tost_p']:.3g}, ±{100 * margin:g} pts)"
        )
        if steps and steps[-1]["to"] == label:
            why += f"; significantly fewer than at {steps[-1]['from']} (p {steps[-1]['p']:.3g})"
    out.update(recommended_label=label, recommended_limit_multiplier=mult, reasons=[why])
    above = evidence[(chosen + 1 if chosen is not None else 0) :]
    out.update(_settle_line(label, why, above, change_i, evidence, margin, alpha))
    if not total_infra:  # nothing to remove: the answer needs no score evidence; the unsettled figures stay beside it
        out["summary"] = f"publish {label}: {why}"
    for e in evidence:
        e.pop("_se"), e.pop("_m")
    out["evidence"] = evidence
    out["mdd_applied"] = _mdd_applied(evidence, chosen, label)
    return out


def _mdd_applied(evidence: list[dict[str, Any]], chosen: int | None, label: str) -> dict[str, Any]:
    """The MDD of the score test at the published limit's step: the published candidate's own test, or --
    when the strict limit is published -- the first candidate's, the test any step up had to pass first."""
    e = evidence[chosen if chosen is not None else 0]
    which = (
        f"the score test that cleared {label}"
        if chosen is not None
        else f"{label} is published: the score test of the first step up ({e['label']}), which any limit above "
        f"{label} had to pass first"
    )
    if e["mdd"] is None:
        return {"config": e["label"], "mdd": None, "label": f"{which}: not computable (fewer than 2 tasks paired)"}
    return {"config": e["label"], "mdd": e["mdd"], "label": f"{which}; {e['mdd_label']}"}


def _diff(b: dict[str, Any], a: dict[str, Any]) -> float | None:
    return None if b.get("estimate") is None or a.get("estimate") is None else b["estimate"] - a["estimate"]


def _rate(w: dict[str, Any]) -> str:
    return "—" if w.get("estimate") is None else f"{100 * w['estimate']:.1f}%"


def _reading(e: dict[str, Any]) -> str:
    parts = ["fewer infra errors" if e["infra_reduced"] else "infra not shown reduced"]
    if e["score_changed"]:
        parts.append(f"score changes {_pts(e['score_diff_vs_reference'])}")
    elif e["equivalent"]:
        parts.append("score shown unchanged")
    else:
        parts.append("score change not settled")
    if e["tasks_finished_only_here"]:
        parts.append(f"{e['tasks_finished_only_here']} task(s) finish only here")
    return "; ".join(parts)


def _why_reference(evidence: list[dict[str, Any]], change_i: int | None, total_infra: int, margin: float) -> str:
    if total_infra == 0:
        return "no infra error in any configuration: the strict limit suffices"
    reduced = [e for e in evidence if e["infra_reduced"]]
    if not reduced:
        best = min(evidence, key=lambda e: e["infra_p_holm"] if e["infra_p_holm"] is not None else 2.0)
        return (
            f"no tested limit significantly reduces infra errors (one-sided exact test, Holm; smallest Holm p "
            f"{best['infra_p_holm']:.3g} at {best['label']})"
        )
    parts = []
    for e in reduced:
        i = evidence.index(e)
        if change_i is not None and i >= change_i:
            parts.append(
                f"{e['label']} reduces infra errors but at or above {evidence[change_i]['label']} the score "
                f"changes ({_pts(evidence[change_i]['score_diff_vs_reference'])}, paired t Holm p "
                f"{evidence[change_i]['score_change_p_holm']:.3g})"
            )
        elif e["tost_p"] is not None:
            only = e["tasks_finished_only_here"]
            parts.append(
                f"{e['label']} reduces infra errors but is not shown to leave the score unchanged "
                f"(TOST p {e['tost_p']:.3g}, ±{100 * margin:g} pts"
                + (f"; {only} task(s) finish only there" if only else "")
                + "); a limit is published only on that evidence"
            )
        else:
            parts.append(f"{e['label']} reduces infra errors; its score is not comparable")
    return "only limits that cannot be published reduce infra errors: " + "; ".join(parts)


def _settle_line(
    label: str,
    why: str,
    above: list[dict[str, Any]],
    change_i: int | None,
    evidence: list[dict[str, Any]],
    margin: float,
    alpha: float,
) -> dict[str, Any]:
    """The summary: what is published, and whether more headroom changes the score (settled or not, one line)."""
    stop = evidence[change_i]["label"] if change_i is not None else None
    unsettled = []
    for e in above:
        if e["label"] == stop:
            break
        if not e["equivalent"]:
            unsettled.append(e)
    head = f"publish {label}: {why}"
    if stop is not None:
        ch = evidence[change_i]  # type: ignore[index]
        tail = (
            f"; from {stop} the score changes ({_pts(ch['score_diff_vs_reference'])}, paired t Holm p "
            f"{ch['score_change_p_holm']:.3g}): more headroom changes what is measured"
        )
    else:
        tail = ""
    if not unsettled:
        if above and stop != (above[0]["label"] if above else None):
            tail = (
                f"; more memory up to {above[-1]['label'] if stop is None else stop} is shown not to change the "
                f"score (TOST, ±{100 * margin:g} pts)" + tail
            )
        return {"settled": True, "summary": head + tail, "unsettled": None}
    widest = max(unsettled, key=lambda e: (e["score_diff_high95"] or 0) - (e["score_diff_low95"] or 0))
    half = (
        None if widest["score_diff_high95"] is None else (widest["score_diff_high95"] - widest["score_diff_low95"]) / 2
    )
    need = max(
        (n for n in (attempts_to_settle(e["_se"], e["_m"], margin, alpha) for e in unsettled) if n), default=None
    )
    line = (
        f"publish {label}; whether more memory changes the score is not settled by this data: "
        + (
            f"±{100 * half:.1f} points at 95% ({widest['label']} − reference {_pts(widest['score_diff_vs_reference'])})"
            if half is not None
            else "no paired score to compare"
        )
        + (f", {need} attempts per task would settle it (TOST ±{100 * margin:g} pts, 80% power)" if need else "")
    )
    return {
        "settled": False,
        "summary": line + tail,
        "unsettled": {
            "labels": [e["label"] for e in unsettled],
            "half_width95": half,
            "attempts_per_task_to_settle": need,
            "line": line,
        },
    }
