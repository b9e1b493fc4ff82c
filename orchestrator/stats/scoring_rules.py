"""Named scoring rules: a score is always a rule applied to trials.

The same trials give different numbers under different rules, and each number answers its
own question. This module computes a run under any of these rules, side by side, and counts
the trials that move between a rule and headroom's headline reading, by reason.

Rules (``RULES`` holds the definitions the report prints):

``headroom:infra-as-failure``
    passes / all trials. headroom's headline. Wilson 95% interval (trials as independent
    draws: what another attempt at each of *these tasks* would score) and the SE clustered by
    task (the sampling unit is the task: what *new tasks like these* would score).
``headroom:infra-excluded``
    passes / trials that were not infra or harness errors; same two intervals.
``terminal-bench:leaderboard``
    The Terminal-Bench 1 harness and leaderboard. A trial counts when ``is_resolved`` is true,
    whatever its ``failure_mode`` (the harness runs the tests after an agent timeout); a run's
    accuracy is resolved trials / all trials of the run (``BenchmarkResults.accuracy``); a
    submission's accuracy is the mean of its runs' accuracies, its stderr the sample SD
    (n - 1) of the run accuracies / sqrt(runs): the run-to-run noise of *these tasks*, not new
    tasks. pass@k per run is the harness's estimator 1 - prod(1 - k / arange(n - c + 1, n + 1))
    averaged over the tasks with at least k attempts, for k = 2, 4, 8, ... and 5, 10.
``harbor:job-mean``
    What a Harbor job's ``result.json`` reports: the mean reward over all the job's trials, a
    trial without a reward counting 0 (``harbor.metrics.mean``), and Harbor's pass@k
    (``harbor.utils.pass_at_k``: binary rewards only, k = 2, 4, 8, ... and 5, 10, 15, ... up to
    the fewest trials of any task, averaged over every task). Harbor publishes no interval.
``terminal-bench-2:official``
    The Terminal-Bench 2.0 leaderboard's query (terminal-bench-experiments, ``get_agent_scores``):
    trials with an exception are left out, except ``AgentTimeoutError`` and
    ``VerifierTimeoutError``; a kept trial counts ``rewards["reward"]``, 0 when it has no reward
    (a verifier timeout never has one; an agent timeout has one when the verifier ran after it,
    as Harbor does); per task the mean p_t over its n_t kept trials; the score is the mean over
    the T tasks; stderr = sqrt(sum_t p_t (1 - p_t) / (n_t - 1)) / T (none when a task has a
    single kept trial, as the query returns NULL), ci95 = 1.96 stderr. It generalises to new
    trials of *these tasks*: the tasks are fixed, so it is smaller than the clustered SE.

Trials from a Terminal-Bench run are read by the leaderboard rule through ``is_resolved``;
under the Harbor rules their failure modes are read as Harbor's exceptions (``agent_timeout``
as ``AgentTimeoutError``, ``test_timeout`` as ``VerifierTimeoutError``, ``none``/``unset`` as no
exception, any other mode as an exception). A trial headroom ran itself is read by its outcome:
a timeout as ``AgentTimeoutError``, a verifier timeout as ``VerifierTimeoutError``, any other
infra or harness error as an exception, and its reward (else passed = 1, anything else 0).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.stats.glossary import SCORE_EXCL, SCORE_FAIL, runs_phrase

from .clustered import clustered_se
from .proportions import wilson

HEADROOM_FAIL = "headroom:infra-as-failure"
HEADROOM_EXCL = "headroom:infra-excluded"
TB_LEADERBOARD = "terminal-bench:leaderboard"
HARBOR_MEAN = "harbor:job-mean"
TB2_OFFICIAL = "terminal-bench-2:official"

TB2_KEPT_EXCEPTIONS = ("AgentTimeoutError", "VerifierTimeoutError")
#: Terminal-Bench failure modes read as Harbor exceptions (for the Harbor rules on Terminal-Bench trials).
TB_MODE_AS_EXCEPTION = {
    "none": None,
    "unset": None,
    "agent_timeout": "AgentTimeoutError",
    "test_timeout": "VerifierTimeoutError",
}
#: Source columns a frame may carry (imports); without them a trial is read as headroom ran it.
SOURCE_COLUMNS = ("source_kind", "tb_resolved", "tb_mode", "h_exception", "h_rewards")


@dataclass(frozen=True)
class RuleInfo:
    name: str
    title: str
    counts: str  # which trials count, and as what
    aggregate: str  # how they become one number
    interval: str  # what the interval or stderr is, and what it generalises to
    source: str  # where the rule is defined

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "title": self.title,
            "counts": self.counts,
            "aggregate": self.aggregate,
            "interval": self.interval,
            "source": self.source,
        }


RULES: dict[str, RuleInfo] = {
    r.name: r
    for r in (
        RuleInfo(
            HEADROOM_FAIL,
            SCORE_FAIL,
            "every trial; passed = 1, any other outcome (infra and harness errors included) = 0",
            "passes / trials",
            "Wilson 95% (trials as independent draws: another attempt at each of these tasks); SE clustered "
            "by task (new tasks like these)",
            "headroom (orchestrator/stats/analyze.py)",
        ),
        RuleInfo(
            HEADROOM_EXCL,
            SCORE_EXCL,
            "trials that were not infra or harness errors; passed = 1, else 0",
            "passes / counted trials",
            "Wilson 95% (another attempt at each of these tasks); SE clustered by task (new tasks like these)",
            "headroom (orchestrator/stats/analyze.py)",
        ),
        RuleInfo(
            TB_LEADERBOARD,
            "Terminal-Bench leaderboard",
            "every trial; is_resolved true = 1 whatever the failure_mode (the harness runs the tests after an "
            "agent timeout), else 0",
            "per run: resolved / trials; a submission: the mean of its runs' accuracies",
            "stderr = sample SD (n - 1) of the run accuracies / sqrt(runs): another run on these tasks "
            "(run-to-run noise), not new tasks",
            "terminal-bench terminal_bench/harness/models.py (BenchmarkResults.accuracy, pass_at_k); the "
            "leaderboard's accuracy +- stderr over a submission's runs",
        ),
        RuleInfo(
            HARBOR_MEAN,
            "Harbor job mean",
            "every trial; its reward, 0 when it has none (exceptions included)",
            "mean over trials",
            "none published",
            "harbor src/harbor/metrics/mean.py, src/harbor/utils/pass_at_k.py",
        ),
        RuleInfo(
            TB2_OFFICIAL,
            "Terminal-Bench 2 official",
            "trials without an exception, and AgentTimeoutError / VerifierTimeoutError trials; "
            "rewards['reward'], 0 when there is none",
            "per task the mean over its counted trials; the mean over tasks",
            "stderr = sqrt(sum p_t (1 - p_t) / (n_t - 1)) / T, ci95 = 1.96 stderr: new trials of these "
            "tasks (the tasks fixed)",
            "terminal-bench-experiments db/schema.sql get_agent_scores(); sql/new/leaderboard_scores.sql (ci95)",
        ),
    )
}
ALL_RULES = tuple(RULES)
HEADROOM_RULES = (HEADROOM_FAIL, HEADROOM_EXCL)
#: The rules a source format publishes, the first being its own headline.
SOURCE_RULES = {"terminal-bench": (TB_LEADERBOARD,), "harbor": (HARBOR_MEAN, TB2_OFFICIAL)}


def parse_rules(text: str | None, source_kinds: list[str]) -> list[str]:
    """``auto`` (headroom's two and the rules of the run's sources), ``all``, or names separated by commas."""
    if text is None or text.strip() in ("", "auto"):
        out = list(HEADROOM_RULES)
        for kind in source_kinds:
            out += [r for r in SOURCE_RULES.get(kind, ()) if r not in out]
        return out
    if text.strip() == "all":
        return list(ALL_RULES)
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise ValueError(f"unknown scoring rule {unknown[0]!r} (known: auto, all, {', '.join(ALL_RULES)})")
    return list(dict.fromkeys(names))


def default_rule(source_kinds: list[str]) -> str:
    """The headline rule: an import's own (the first source's format), else headroom's."""
    for kind in source_kinds:
        if kind in SOURCE_RULES:
            return SOURCE_RULES[kind][0]
    return HEADROOM_FAIL


# -- pass@k exactly as each harness writes it ----------------------------------------------------


def tb_k_values(min_attempts: int) -> list[int]:
    """k as terminal-bench reports pass@k: powers of two up to the fewest attempts, and 5 and 10."""
    ks = {2**i for i in range(1, int(math.log2(min_attempts)) + 1)} if min_attempts >= 2 else set()
    ks |= {k for k in (5, 10) if min_attempts >= k}
    return sorted(ks)


def tb_pass_at_k(n: np.ndarray, c: np.ndarray, k: int) -> float | None:
    """terminal-bench's estimator over per-task attempts n and successes c, averaged over the tasks with n >= k."""
    vals = [
        1.0 if nn - cc < k else float(1.0 - np.prod(1.0 - k / np.arange(nn - cc + 1, nn + 1)))
        for nn, cc in zip(np.asarray(n, int).tolist(), np.asarray(c, int).tolist())
        if nn >= k
    ]
    return float(np.mean(vals)) if vals else None


def harbor_k_values(max_k: int) -> list[int]:
    ks: set[int] = set()
    k = 2
    while k <= max_k:
        ks.add(k)
        k *= 2
    ks |= set(range(5, max_k + 1, 5))
    return sorted(ks)


def harbor_pass_at_k(n: np.ndarray, c: np.ndarray) -> dict[int, float]:
    """Harbor's pass@k over every task, for Harbor's k values (binary rewards only: c counts rewards of 1)."""
    n, c = np.asarray(n, int).tolist(), np.asarray(c, int).tolist()
    if not n:
        return {}
    out = {}
    for k in harbor_k_values(min(n)):
        total = 0.0
        for nn, cc in zip(n, c):
            if nn - cc < k:
                total += 1.0
                continue
            product = 1.0
            for i in range(k):
                product *= (nn - cc - i) / (nn - i)
            total += 1.0 - product
        out[k] = total / len(n)
    return out


def tb2_official(task: np.ndarray, value: np.ndarray) -> dict[str, Any]:
    """The Terminal-Bench 2 leaderboard's score and stderr over (task code, value) of the counted trials."""
    if len(value) == 0:
        return {"estimate": None, "stderr": None, "ci95": None, "n_tasks": 0}
    inv, tasks = pd.factorize(task)
    n = np.bincount(inv).astype(float)
    p = np.bincount(inv, weights=value) / n
    acc = float(p.mean())
    if np.any(n < 2):
        return {
            "estimate": acc,
            "stderr": None,
            "ci95": None,
            "n_tasks": int(len(tasks)),
            "stderr_note": f"{int((n < 2).sum())} task(s) with a single counted trial: the formula divides by "
            "n - 1, so there is no stderr (the leaderboard's query returns NULL)",
        }
    se = float(math.sqrt(float(np.sum(p * (1 - p) / (n - 1)))) / len(tasks))
    return {"estimate": acc, "stderr": se, "ci95": 1.96 * se, "n_tasks": int(len(tasks))}


# -- reading each trial ---------------------------------------------------------------------------


@dataclass
class TrialView:
    """Per-trial arrays every rule reads (one row per trial of the frame)."""

    label: np.ndarray
    task: np.ndarray  # integer codes
    run: np.ndarray  # the source run, or the attempt index for trials headroom ran
    run_basis: str
    outcome: np.ndarray
    reason: np.ndarray
    kind: np.ndarray  # terminal-bench | harbor | headroom
    passed: np.ndarray  # headroom's verdict
    resolved: np.ndarray  # the leaderboard's success: is_resolved, else reward >= threshold, else passed
    reward: np.ndarray  # the reward Harbor's mean reads, 0 when none
    tb2_kept: np.ndarray  # counted by the Terminal-Bench 2 query
    tb2_reward: np.ndarray  # what it counts
    tb_mode: np.ndarray
    h_exception: np.ndarray
    model_outcome: np.ndarray  # not an infra or harness error (headroom's infra-excluded denominator)
    label_code: np.ndarray  # integer code of label, in order of first appearance
    label_names: list[str]
    combo: np.ndarray  # integer code of (kind, error label, outcome) per trial
    combo_keys: list[tuple[str, str, str]]

    def error_counts(self, idx: np.ndarray, extra: np.ndarray | None = None) -> dict[tuple[Any, ...], int]:
        """The trials ``idx`` counted by (kind, the source's own error label, outcome[, extra]). Counted over integer
        codes of the few distinct combinations (see :func:`_combos`), never per trial."""
        if not len(idx):
            return {}
        code = self.combo[idx].astype(np.int64)
        if extra is not None:
            code = code * 2 + np.asarray(extra, bool)
        counts = np.bincount(code)
        out = {}
        for c in np.flatnonzero(counts):
            key = self.combo_keys[c // 2] + (bool(c % 2),) if extra is not None else self.combo_keys[c]
            out[key] = int(counts[c])
        return out


def _combos(
    kind: np.ndarray, tb_mode: np.ndarray, h_exc: np.ndarray, outcome: pd.Series, reason: pd.Series
) -> tuple[np.ndarray, list[tuple[str, str, str]]]:
    """Each trial's (kind, error label, outcome) as an integer code: the label is a Terminal-Bench failure mode, a
    Harbor exception, or (a trial headroom ran) its outcome with the reason of an infra or harness error.

    The outcome and reason are factorised as the frame holds them (fast on a million rows); the source columns
    only when some trial came from a source (imports are small)."""
    cols = [pd.factorize(outcome, use_na_sentinel=False)[0], pd.factorize(reason, use_na_sentinel=False)[0]]
    if np.any(kind != "headroom"):
        cols += [pd.factorize(pd.Series(c, dtype=object), use_na_sentinel=False)[0] for c in (kind, tb_mode, h_exc)]
    code = np.zeros(len(kind), dtype=np.int64)
    for c in cols:
        code = code * (int(c.max()) + 2 if len(c) else 1) + c
    # Hash-factorised (np.unique sorts a million codes); codes come in order of first appearance, so the running
    # maximum steps up exactly where each combination first appears.
    inverse = pd.factorize(code)[0]
    first = np.flatnonzero(np.diff(np.maximum.accumulate(inverse), prepend=-1) > 0) if len(inverse) else inverse
    keys = []
    o_arr, r_arr = outcome.iloc[first].to_numpy(dtype=object), reason.iloc[first].to_numpy(dtype=object)
    for i, o, r in zip(first, o_arr, r_arr):
        k, mode, exc = kind[i], tb_mode[i], h_exc[i]
        if k == "terminal-bench":
            label = str(mode)
        elif k == "harbor":
            label = str(exc) if isinstance(exc, str) and exc else "no exception"
        elif o in ("infra_error", "harness_error") and isinstance(r, str) and r:
            label = f"{o}({r})"
        else:
            label = str(o)
        keys.append((str(k), label, str(o)))
    return inverse.astype(np.int64).ravel(), keys


def _col(df: pd.DataFrame, name: str, default: Any = None) -> np.ndarray:
    if name in df.columns:
        return df[name].to_numpy(dtype=object)
    return np.full(len(df), default, dtype=object)


def _tb2_reward(raw: Any) -> float:
    """``rewards["reward"]``, 0 when the rewards lack it, NaN when there are none (the query's COALESCE then makes 0)."""
    if not isinstance(raw, (str, dict)):
        return math.nan
    try:
        rewards = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return math.nan
    if not isinstance(rewards, dict):
        return math.nan
    v = rewards.get("reward", 0)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def view(df: pd.DataFrame, threshold: float = 1.0) -> TrialView:
    """Read every trial once, vectorised (a native sweep may hold a million)."""
    n = len(df)
    outcome_s = df["outcome"].astype(str)
    outcome = outcome_s.to_numpy(dtype=object)
    reason = _col(df, "reason")
    reward = pd.to_numeric(df["reward"], errors="coerce").to_numpy(float) if "reward" in df else np.full(n, np.nan)
    kind = np.full(n, "headroom", dtype=object)
    if "source_kind" in df.columns:
        sk = df["source_kind"].to_numpy(dtype=object)
        kind[sk == "terminal-bench"] = "terminal-bench"
        kind[sk == "harbor"] = "harbor"
    is_tb, is_h = kind == "terminal-bench", kind == "harbor"
    passed = outcome == "passed"
    rewarded = np.nan_to_num(reward, nan=-np.inf) >= threshold
    no_reward_value = np.where(np.isnan(reward), passed.astype(float), reward)
    # Native trials: a timeout reads as AgentTimeoutError, a verifier timeout as VerifierTimeoutError.
    # pandas' isin hashes (numpy's sorts object arrays: seconds on a million trials)
    kept_native = outcome_s.isin(["passed", "failed", "abstained", "timeout"]).to_numpy() | (
        (outcome == "harness_error") & (reason == "verifier_timeout")
    )
    model_outcome = ~outcome_s.isin(["infra_error", "harness_error"]).to_numpy()
    tb_res = np.zeros(n, bool)
    tb_mode = np.full(n, None, dtype=object)
    h_exc = np.full(n, None, dtype=object)
    tb2_reward = no_reward_value.copy()
    kept = kept_native.copy()
    if is_tb.any():
        tb_res[is_tb] = [v is True or v == 1 for v in _col(df, "tb_resolved")[is_tb]]
        tb_mode[is_tb] = [(m if isinstance(m, str) and m else "unset").lower() for m in _col(df, "tb_mode")[is_tb]]
        kept[is_tb] = np.isin(tb_mode[is_tb], list(TB_MODE_AS_EXCEPTION))
        tb2_reward[is_tb] = tb_res[is_tb]
    if is_h.any():
        h_exc[is_h] = [e if isinstance(e, str) and e else None for e in _col(df, "h_exception")[is_h]]
        kept[is_h] = [e is None or e in TB2_KEPT_EXCEPTIONS for e in h_exc[is_h]]
        tb2_reward[is_h] = [_tb2_reward(r) for r in _col(df, "h_rewards")[is_h]]
    resolved = np.where(is_tb, tb_res, np.where(is_h, rewarded, passed | rewarded))
    mean_reward = np.where(is_tb, tb_res.astype(float), np.where(is_h, np.nan_to_num(reward, nan=0.0), no_reward_value))
    has_runs = "source_run" in df.columns and bool(df["source_run"].notna().any())
    if has_runs:
        run = df["source_run"].astype(object).where(df["source_run"].notna(), "(native)").to_numpy(dtype=object)
    else:
        run = _col(df, "attempt", 0)
    task = pd.factorize(df["task_id"].astype(str))[0]
    label_code, label_names = pd.factorize(df["config_label"].astype(str))
    combo, keys = _combos(
        kind, tb_mode, h_exc, outcome_s, df["reason"] if "reason" in df.columns else pd.Series([None] * n, dtype=object)
    )
    return TrialView(
        np.asarray(label_names, dtype=object)[label_code],
        task,
        run,
        "source runs" if has_runs else "attempt index",
        outcome,
        reason,
        kind,
        passed,
        resolved,
        mean_reward,
        kept,
        np.nan_to_num(tb2_reward, nan=0.0),
        tb_mode,
        h_exc,
        model_outcome,
        label_code,
        [str(x) for x in label_names],
        combo,
        keys,
    )


def counted(rule: str, v: TrialView) -> tuple[np.ndarray, np.ndarray]:
    """(counted?, value) per trial under a rule."""
    every = np.ones(len(v.outcome), bool)
    if rule == HEADROOM_FAIL:
        return every, v.passed.astype(float)
    if rule == HEADROOM_EXCL:
        return v.model_outcome, v.passed.astype(float)
    if rule == TB_LEADERBOARD:
        return every, v.resolved.astype(float)
    if rule == HARBOR_MEAN:
        return every, v.reward
    if rule == TB2_OFFICIAL:
        return v.tb2_kept, v.tb2_reward
    raise ValueError(f"unknown scoring rule {rule!r}")


# -- one configuration under one rule ------------------------------------------------------------


def _proportion_block(k: int, n: int, pass_t: np.ndarray, n_t: np.ndarray) -> dict[str, Any]:
    w, se = wilson(k, n), clustered_se(pass_t, n_t)
    return {
        "estimate": w.estimate,
        "n_trials": n,
        "intervals": [
            {
                "kind": "wilson95",
                "low": w.low,
                "high": w.high,
                "generalises_to": "these tasks: another attempt at each (trials as independent draws)",
            },
            {
                "kind": "clustered_se",
                "se": se.se_clustered,
                "generalises_to": "new tasks like these (task is the unit)",
            },
        ],
    }


def _per_task(task: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    inv = pd.factorize(task)[0]
    return np.bincount(inv, weights=value), np.bincount(inv).astype(float)


def _task_counts(task: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per task: attempts and successes (value >= 0.5)."""
    inv = pd.factorize(task)[0]
    return np.bincount(inv), np.bincount(inv, weights=(value >= 0.5).astype(float)).round().astype(int)


def score(rule: str, v: TrialView, m: np.ndarray) -> dict[str, Any]:
    """One configuration (the trials ``m`` selects) under ``rule``."""
    keep, value = counted(rule, v)
    sel = m & keep
    task, val = v.task[sel], value[sel]
    out: dict[str, Any] = {
        "rule": rule,
        "n_trials_read": int(m.sum()),
        "n_trials": int(sel.sum()),
        "n_tasks": int(np.count_nonzero(np.bincount(task))) if len(task) else 0,
    }
    excluded = np.flatnonzero(m & ~keep)
    if len(excluded):
        by: dict[str, int] = {}
        for (_, label, _), n in v.error_counts(excluded).items():
            by[label] = by.get(label, 0) + n
        out["excluded_by"] = dict(sorted(by.items()))
    if rule in (HEADROOM_FAIL, HEADROOM_EXCL):
        pass_t, n_t = _per_task(task, val) if len(val) else (np.zeros(0), np.zeros(0))
        out.update(_proportion_block(int(val.sum()), int(len(val)), pass_t, n_t))
        return out
    if rule == TB2_OFFICIAL:
        res = tb2_official(task, val)
        out.update(res)
        out["intervals"] = [
            {
                "kind": "stderr",
                "se": res["stderr"],
                "ci95": res["ci95"],
                "generalises_to": "these tasks: new trials of each (the tasks fixed)",
            }
        ]
        return out
    if rule == HARBOR_MEAN:
        out["estimate"] = float(val.mean()) if len(val) else None
        binary = bool(np.all(np.isin(val, [0.0, 1.0])))
        out["pass_at_k"] = {str(k): p for k, p in harbor_pass_at_k(*_task_counts(task, val)).items()} if binary else {}
        out["intervals"] = []
        return out
    # terminal-bench:leaderboard: per run, then the mean over runs.
    run_code, run_names = pd.factorize(v.run[sel])
    n_r = np.bincount(run_code).astype(float)
    accs = np.bincount(run_code, weights=val) / n_r if len(val) else np.zeros(0)
    per_run = []
    for r in range(min(len(run_names), 200)):  # the summary statistics always use every run
        rm = run_code == r
        nt, ct = _task_counts(task[rm], val[rm])
        per_run.append(
            {
                "run": str(run_names[r]),
                "n": int(n_r[r]),
                "resolved": int(round(val[rm].sum())),
                "accuracy": float(accs[r]),
                "pass_at_k": {str(k): tb_pass_at_k(nt, ct, k) for k in tb_k_values(int(nt.min()))},
            }
        )
    out["estimate"] = float(accs.mean()) if len(accs) else None
    out["n_runs"] = int(len(accs))
    out["run_spread"] = {
        "sd": float(accs.std(ddof=1)) if len(accs) > 1 else None,
        "min": float(accs.min()) if len(accs) else None,
        "max": float(accs.max()) if len(accs) else None,
    }
    out["run_basis"] = v.run_basis
    stderr = float(accs.std(ddof=1) / math.sqrt(len(accs))) if len(accs) > 1 else None
    out["stderr"] = stderr
    out["intervals"] = [
        {
            "kind": "stderr",
            "se": stderr,
            "generalises_to": "these tasks: another run (run-to-run noise over "
            f"{runs_phrase(len(accs), v.run_basis)}), not new tasks",
        }
    ]
    nt, ct = _task_counts(task, val)
    out["pass_at_k"] = {str(k): tb_pass_at_k(nt, ct, k) for k in tb_k_values(int(nt.max()))} if len(nt) else {}
    out["pass_at_k_basis"] = (
        "pooled over the configuration's runs, over the tasks with at least k attempts "
        "(terminal-bench reports pass@k per run)"
    )
    out["per_run"] = per_run
    return out


def _move_reason(kind: str, error: Any, outcome: str, rule_value: float, headroom_value: float) -> str:
    if rule_value > headroom_value:
        if error in ("agent_timeout", "AgentTimeoutError"):
            return "resolved after agent timeout" if kind == "terminal-bench" else "rewarded after agent timeout"
        return f"{'resolved' if kind == 'terminal-bench' else 'rewarded'} with {error} (headroom: {outcome})"
    return f"passed by headroom, not by the rule ({error})"


def moves(rule: str, v: TrialView, m: np.ndarray) -> list[dict[str, Any]]:
    """The trials of one configuration that ``rule`` counts differently from headroom's headline, by reason."""
    if rule == HEADROOM_FAIL:
        return []
    keep, value = counted(rule, v)
    up, base = value >= 0.5, v.passed
    out: dict[tuple[str, str], int] = {}
    for (_, err, _), n in v.error_counts(np.flatnonzero(m & ~keep)).items():
        key = (f"left out by the rule: {err}", "left out")
        out[key] = out.get(key, 0) + n
    diff = np.flatnonzero(m & keep & (up != base))
    for (kind, err, outcome, is_up), n in v.error_counts(diff, up[diff]).items():
        key = (
            _move_reason(kind, err, outcome, float(is_up), float(not is_up)),
            "success under the rule, not under headroom" if is_up else "success under headroom, not under the rule",
        )
        out[key] = out.get(key, 0) + n
    return [
        {"reason": r, "effect": e, "trials": n} for (r, e), n in sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def evaluate(
    df: pd.DataFrame,
    rules: list[str],
    *,
    config_order: list[str] | None = None,
    default: str | None = None,
    threshold: float = 1.0,
) -> dict[str, Any]:
    """Every configuration of a trial frame under every rule named, with the trials that move, by reason."""
    v = view(df, threshold)
    present = v.label_names
    labels = [lab for lab in (config_order or []) if lab in present] + [
        lab for lab in present if lab not in (config_order or [])
    ]
    configs: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    for lab in labels:
        m = v.label_code == present.index(lab)
        configs[lab] = {r: score(r, v, m) for r in rules}
        moved[lab] = {r: moves(r, v, m) for r in rules if r != HEADROOM_FAIL}
    return {
        "schema": "headroom.scoring_rules/1",
        "requested": rules,
        "default": default if default in rules else rules[0],
        "run_basis": v.run_basis,
        "definitions": {r: RULES[r].to_dict() for r in rules},
        "configs": configs,
        "moves": moved,
        "note": "Each rule answers its own question; the intervals say what each generalises to. 'moves' counts "
        f"the trials each rule scores differently from {HEADROOM_FAIL}, by reason.",
    }
