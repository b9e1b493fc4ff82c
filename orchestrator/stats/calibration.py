"""The calibration recommendation: which resource band to publish.

WHY: a task's resource spec used as both floor and ceiling ("1x strict") kills
trials on transient memory spikes -- infrastructure errors, not model failures.
Raising the ceiling removes those, but too much headroom starts to change what
is measured (agents that need big dependencies succeed only with generous
limits). The publishable ceiling is the smallest one that removes a
*significant* share of infra errors while the score stays *within noise* of the
floor; above the first ceiling whose score is significantly higher than the
floor, extra headroom is measuring something else.

Rules (all against the reference, by default "1x-strict"; only configurations
later in the canonical order -- more headroom -- are candidates):

* infra_reduced: Holm-adjusted exact test (Boschloo; Fisher above the size cap)
  p < alpha AND the infra-error rate is below the reference's.
* score_above_floor: Holm-adjusted CMH (stratified by task) p < alpha AND the
  infra-excluded score (passes among trials the infrastructure let finish) is
  higher than the reference's.
* within_noise: that CMH test is not significant (Holm) AND the infra-excluded
  score difference is within its minimum detectable difference (80% power,
  alpha 0.05) in the direction observed.

  Why the infra-excluded score and not the headline: under the headline, infra
  errors count as failures, so a ceiling that removes infra errors raises the
  headline by construction, and "fewer infra errors" and "score within noise"
  would contradict each other exactly when the infra effect is large. The
  question here is whether headroom changes what the *agent* achieves; the
  infra errors are judged by their own test. Headline differences stay in the
  evidence for the reader. The MDD used is the *conditional* one
  (trials independent given the task set), which is the noise level of the
  paired tests here; the design-effect MDD is far larger when tasks differ a
  lot and would wave through real score changes.
* recommended ceiling = the first candidate with infra_reduced AND within_noise
  that comes before the first score_above_floor candidate.
* score_changes_at = the first score_above_floor candidate; max_within_noise =
  the last within_noise candidate before it (the top of the publishable band).

It REFUSES (status "refused", reasons listed) when: the reference is missing,
there is no candidate, fewer than ``min_tasks`` tasks or ``min_attempts``
attempts per task, or no candidate significantly reduces infra errors while
staying within noise. That last reason names the condition that failed, as the
evidence table shows it: no significant infra reduction (with the smallest Holm
p), or, for each candidate that does reduce infra errors, why its score is not
within noise (a significant score difference, a gap above the MDD, or an MDD
that does not exist in that direction: near a 90% score with few trials no
rate up to 100% is detectable, so no gap can be called noise). Each evidence
row carries the same reason (``not_within_noise_because`` and its short form).
It then says how many attempts per task would be needed
(power calculation: 80% power at alpha / family size, a Bonferroni bound on
Holm's first step): to detect the best observed infra reduction (or, if none
was observed, a two-thirds reduction as in the Terminal-Bench study; the
planned reduction is capped at two thirds so a lucky 0/n does not make the
plan look cheap) and to
bring the score MDD down to ``target_mdd``. A second, "generalising" set of
figures includes the intra-task design effect; None there means no number of
attempts suffices with these tasks (intra-task correlation caps the
information), i.e. more tasks are needed.
"""

from __future__ import annotations

from typing import Any

from . import power

ALPHA = 0.05


def _pts(x: float) -> str:
    return f"{100 * x:+.1f} pts"


def _not_within_noise(diff: float | None, bound: float | None, cmh_sig: bool, cmh_p_holm: float | None,
                      excl_mdd: dict[str, Any], ref_cfg: dict[str, Any]) -> tuple[str, str]:
    """Why a candidate's agent score is not "within noise" of the reference: (short reading, sentence with numbers).

    Same conditions, in the same order, as ``within_noise`` in :func:`recommend`.
    """
    if diff is None:
        return "no agent score", "no agent score to compare (no trial the infrastructure let finish on one side)"
    if cmh_sig:
        return "score differs", f"agent score differs significantly ({_pts(diff)}, CMH Holm p {cmh_p_holm:.4f})"
    if bound is None:
        ref = ref_cfg["score_infra_excluded"]
        direction, edge = ("upward", "100%") if diff >= 0 else ("downward", "0%")
        return ("MDD undefined",
                f"the {direction} minimum detectable difference is undefined: at the reference's infra-excluded score "
                f"{100 * (ref['estimate'] or 0.0):.1f}% with {excl_mdd.get('n_per_config', ref['n'])} trials, no rate "
                f"between it and {edge} is detectable at 80% power, so a gap of {_pts(diff)} cannot be shown to be "
                "within noise")
    return (f"gap > MDD {100 * bound:.1f} pts",
            f"agent score gap {_pts(diff)} is larger than the minimum detectable difference ({100 * bound:.1f} pts)")


def _no_recommendation_reason(evidence: list[dict[str, Any]], change: dict[str, Any] | None, alpha: float) -> str:
    """The refusal reason the evidence table shows: which condition failed, for which candidate, with the numbers."""
    considered = evidence
    if change is not None:  # candidates at or above the first score change cannot be recommended
        considered = evidence[: next(i for i, e in enumerate(evidence) if e["label"] == change["label"])]
    reduced = [e for e in considered if e["infra_reduced"] and not e["within_noise"]]
    if not reduced:
        ps = [e for e in evidence if e["infra_p_holm"] is not None]
        best = min(ps, key=lambda e: e["infra_p_holm"]) if ps else None
        text = "no configuration significantly reduces infra errors (Holm-adjusted exact test, alpha " + f"{alpha:g})"
        if best is not None:
            text += f"; the smallest Holm p is {best['infra_p_holm']:.4f} ({best['label']})"
        later = [e["label"] for e in evidence if e["infra_reduced"] and e not in considered]
        if later:
            text = (f"only {', '.join(later)} significantly reduce infra errors, at or above {change['label']} "  # type: ignore[index]
                    "where the agent score is significantly higher than the reference's (headroom changes what is measured)")
        return text
    parts = [f"{e['label']} (infra Holm p {e['infra_p_holm']:.4f}): {e['not_within_noise_because']}" for e in reduced]
    return ("the configurations that significantly reduce infra errors do not keep the agent score within noise "
            "of the reference: " + "; ".join(parts))


def recommend(
    configs: list[dict[str, Any]],
    ref: int | None,
    vs_ref: dict[str, dict[str, Any]],
    mdd: dict[str, Any] | None,
    *,
    n_tasks: int,
    min_attempts_per_task: int,
    icc_pass: float,
    icc_infra: float,
    family_size: int,
    alpha: float = ALPHA,
    min_tasks: int = 10,
    min_attempts: int = 2,
    target_mdd: float = 0.03,
) -> dict[str, Any]:
    """Build the recommendation dict (see module docstring for the rules).

    ``configs`` are analyze's per-config blocks (canonical order), ``vs_ref``
    maps a candidate label to its comparison entry against the reference.
    """
    reasons: list[str] = []
    evidence: list[dict[str, Any]] = []
    if ref is None:
        return {"status": "refused", "reasons": ["reference configuration not present"], "evidence": []}
    ref_cfg = configs[ref]
    candidates = [c for c in configs[ref + 1 :]]
    if not candidates:
        reasons.append("no configuration with more headroom than the reference")
    if n_tasks < min_tasks:
        reasons.append(f"too few tasks: {n_tasks} < {min_tasks}")
    if min_attempts_per_task < min_attempts:
        reasons.append(f"too few attempts per task: {min_attempts_per_task} < {min_attempts}")

    excl_mdd = (mdd or {}).get("infra_excluded") or {}
    m_up = excl_mdd.get("mdd_up")
    m_down = excl_mdd.get("mdd_down")
    recommended = None
    change = None
    last_within = None
    for c in candidates:
        comp = vs_ref.get(c["label"])
        if comp is None:
            continue
        infra = comp["infra"]
        cmh = comp["score_infra_excluded"]["cmh"]
        diff = comp["score_infra_excluded"]["diff"]
        infra_reduced = (
            infra["p_holm"] is not None
            and infra["p_holm"] < alpha
            and infra["rate_b"] is not None
            and infra["rate_a"] is not None
            and infra["rate_b"] < infra["rate_a"]
        )
        cmh_sig = cmh["p_holm"] is not None and cmh["p_holm"] < alpha
        score_above = bool(cmh_sig and diff is not None and diff > 0)
        bound = m_up if (diff is not None and diff >= 0) else m_down
        within_mdd = diff is not None and bound is not None and abs(diff) <= bound
        within_noise = bool(not cmh_sig and within_mdd)
        why_short, why_not = (None, None) if within_noise else _not_within_noise(
            diff, bound, cmh_sig, cmh["p_holm"], excl_mdd, ref_cfg)
        evidence.append(
            {
                "label": c["label"],
                "limit_multiplier": c["limit_multiplier"],
                "request_multiplier": c["request_multiplier"],
                "infra_error_rate": c["infra_error_rate"],
                "score": c["score_infra_excluded"],
                "score_basis": "score_infra_excluded",
                "score_diff_vs_reference": diff,
                "headline_score": c["score_infra_as_failure"],
                "headline_diff_vs_reference": comp["score"]["diff"],
                "headline_cmh_p_holm": comp["score"]["cmh"]["p_holm"],
                "mean_task_diff_vs_reference": comp["score"]["paired"]["mean_task_diff"],
                "infra_p": infra["p"],
                "infra_p_holm": infra["p_holm"],
                "infra_test": infra["method"],
                "score_cmh_p": cmh["p"],
                "score_cmh_p_holm": cmh["p_holm"],
                "score_sign_p": comp["score"]["sign"]["p"],
                "score_sign_p_holm": comp["score"]["sign"]["p_holm"],
                "mdd_bound": bound,
                "infra_reduced": bool(infra_reduced),
                "score_above_floor": score_above,
                "within_noise": within_noise,
                "not_within_noise_because": why_not,
                "not_within_noise_short": why_short,
            }
        )
        if change is None:
            if score_above:
                change = c
            else:
                if within_noise:
                    last_within = c
                if recommended is None and infra_reduced and within_noise:
                    recommended = c

    if candidates and recommended is None:
        reasons.append(_no_recommendation_reason(evidence, change, alpha))

    # Power: attempts per task needed for a decisive sweep. "conditional" matches the
    # tests used above (trials independent given the task set); "generalising" adds
    # the intra-task design effect (would it hold on a fresh sample of tasks?).
    alpha_plan = alpha / max(1, family_size)
    ref_infra = ref_cfg["infra_error_rate"]["estimate"] or 0.0
    best_infra = min(
        (c["infra_error_rate"]["estimate"] for c in candidates if c["infra_error_rate"]["estimate"] is not None),
        default=None,
    )
    # Plan for the best observed reduction, but never for more than two thirds:
    # a lucky 0/n in a small sweep must not make the plan look cheap.
    if best_infra is not None and ref_infra / 3.0 <= best_infra < ref_infra:
        target_infra, infra_basis = best_infra, "best observed candidate infra rate"
    elif best_infra is not None and best_infra < ref_infra:
        target_infra, infra_basis = ref_infra / 3.0, "two-thirds reduction (observed reduction larger; capped)"
    else:
        target_infra, infra_basis = ref_infra / 3.0, "assumed two-thirds reduction (no reduction observed)"
    n_eff_infra = power.n_effective_needed(ref_infra, target_infra, alpha=alpha_plan) if ref_infra > 0 else None
    base = ref_cfg["score_infra_excluded"]["estimate"] or 0.0
    n_eff_score = power.n_effective_needed(base, min(1.0, base + target_mdd))

    def need(n_eff: float | None, icc: float) -> int | None:
        return None if n_eff is None else power.attempts_per_task_needed(n_eff, n_tasks, icc)

    need_infra, need_score = need(n_eff_infra, 0.0), need(n_eff_score, 0.0)
    gen_infra, gen_score = need(n_eff_infra, icc_infra), need(n_eff_score, icc_pass)
    needs = [x for x in (need_infra, need_score) if x is not None]
    gen_missing = (n_eff_infra is not None and gen_infra is None) or (n_eff_score is not None and gen_score is None)
    planning = {
        "alpha_per_test": alpha_plan,
        "infra_reference_rate": ref_infra,
        "infra_target_rate": target_infra,
        "infra_target_basis": infra_basis,
        "target_mdd": target_mdd,
        "attempts_per_task_for_infra": need_infra,
        "attempts_per_task_for_score_mdd": need_score,
        "attempts_per_task_needed": max(needs) if needs else None,
        "generalising_attempts_per_task_for_infra": gen_infra,
        "generalising_attempts_per_task_for_score_mdd": gen_score,
        "generalising_needs_more_tasks": bool(gen_missing),
        "current_attempts_per_task": min_attempts_per_task,
        "note": "80% power at alpha / family size. 'generalising' figures include the intra-task "
        "design effect; None there means no number of attempts suffices with this many tasks: add tasks",
    }
    if reasons:
        planning["additional_attempts_per_task"] = (
            None if planning["attempts_per_task_needed"] is None
            else max(0, planning["attempts_per_task_needed"] - min_attempts_per_task)
        )
        return {
            "status": "refused",
            "reasons": reasons,
            "reference": ref_cfg["label"],
            "recommended_label": None,
            "recommended_limit_multiplier": None,
            "max_within_noise_label": None,
            "max_within_noise_limit_multiplier": None,
            "score_changes_at_label": change["label"] if change else None,
            "score_changes_at_limit_multiplier": change["limit_multiplier"] if change else None,
            "evidence": evidence,
            "power": planning,
        }
    return {
        "status": "recommended",
        "reasons": [],
        "reference": ref_cfg["label"],
        "recommended_label": recommended["label"],
        "recommended_limit_multiplier": recommended["limit_multiplier"],
        "recommended_request_multiplier": recommended["request_multiplier"],
        "max_within_noise_label": last_within["label"] if last_within else None,
        "max_within_noise_limit_multiplier": last_within["limit_multiplier"] if last_within else None,
        "score_changes_at_label": change["label"] if change else None,
        "score_changes_at_limit_multiplier": change["limit_multiplier"] if change else None,
        "summary": (
            f"publish limit {recommended['label']}: infra errors significantly below {ref_cfg['label']} "
            f"with the score within noise"
            + (f"; headroom at or above {change['label']} changes the score" if change else "; no configuration in the sweep significantly changes the score")
        ),
        "evidence": evidence,
        "power": planning,
    }
