"""One vectorised pass from trial rows to the count arrays every statistic needs.

WHY: a sweep can hold a million trials. Every statistic in this package is a
function of a few small arrays -- per (config, task) outcome counts, per
(config, attempt) pass counts, per-config sums of cost/latency/tokens -- so we
build those once with integer codes and ``np.bincount`` (no per-row Python, no
repeated groupbys over the big frame) and never touch the rows again.

Input contract: one row per trial (final try), columns task_id, config_label,
request_multiplier, limit_multiplier (NaN = unbounded), attempt, outcome,
reason, cluster_id, duration_s, cost_usd, tokens_in, tokens_out,
peak_memory_bytes, memory_limit_bytes. Configuration order: limit multiplier
(NaN as +inf), then request multiplier, then label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: Every outcome of orchestrator.spec.outcome.Outcome, in the order of the counts' last axis.
OUTCOMES: tuple[str, ...] = ("passed", "failed", "timeout", "infra_error", "harness_error", "abstained")
PASSED, FAILED, TIMEOUT, INFRA, HARNESS, ABSTAINED = range(len(OUTCOMES))
N_OUTCOMES = len(OUTCOMES)
#: Outcomes that say something about the agent: the denominator of the infra-excluded score.
MODEL_COLUMNS = (PASSED, FAILED, TIMEOUT, ABSTAINED)

REQUIRED_COLUMNS: tuple[str, ...] = (
    "task_id",
    "config_label",
    "request_multiplier",
    "limit_multiplier",
    "attempt",
    "outcome",
)


@dataclass
class Aggregates:
    labels: list[str]  # configs in canonical order
    request: np.ndarray  # (C,)
    limit: np.ndarray  # (C,) NaN = unbounded
    tasks: list[str]  # (T,)
    task_cluster: np.ndarray  # (T,) int code into clusters
    clusters: list[str]
    counts: np.ndarray  # (C, T, N_OUTCOMES) outcome counts
    attempt_n: np.ndarray  # (C, A) trials per repeat index
    attempt_pass: np.ndarray  # (C, A) passes per repeat index
    reasons: list[dict[str, int]]  # per config: infra reason -> count
    duration_sum: np.ndarray  # (C,)
    duration_n: np.ndarray  # (C,) trials with a recorded duration
    cost_sum: np.ndarray
    cost_n: np.ndarray
    cost_pass_n: np.ndarray  # (C,) passes among the trials that reported a cost
    tok_in_sum: np.ndarray
    tok_in_n: np.ndarray
    tok_out_sum: np.ndarray
    tok_out_n: np.ndarray
    tok_sum: np.ndarray  # (C,) in + out tokens over trials that reported both
    tok_n: np.ndarray
    tok_pass_n: np.ndarray
    peak_ratio_max: np.ndarray  # (C, T) NaN when no limit / no measurement
    peak_ratio_mean: np.ndarray
    peak_bytes_max: np.ndarray
    notes: list[str] = field(default_factory=list)
    # Of the trials that reported cost / both token counts: those whose figures the model gateway measured
    # (usage_source = gateway); the rest are the agent's own report.
    cost_gw_n: np.ndarray | None = None
    tok_gw_n: np.ndarray | None = None
    # Run-to-run spread: over the source runs an import came from, else over attempt indices (a native sweep).
    run_n: np.ndarray | None = None  # (C, R) trials per run
    run_pass: np.ndarray | None = None  # (C, R) passes per run
    run_basis: str = "attempt index"

    @property
    def n_configs(self) -> int:
        return len(self.labels)

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)


def _col(df: pd.DataFrame, name: str) -> np.ndarray:
    if name in df.columns:
        return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.full(len(df), np.nan)


def _factorize_first(values: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pd.factorize in order of first appearance, plus each code's first row index.

    Codes appear in first-appearance order, so the first row of code i is where
    the running maximum of the codes first reaches i: O(n), no sort or hash set.
    """
    codes, uniques = pd.factorize(values, sort=False)
    if np.any(codes < 0):
        raise ValueError(f"missing values in column {values.name!r}")
    running = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.diff(running, prepend=-1) > 0)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object), first


def config_sort_key(label: str, request: float, limit: float) -> tuple[float, float, str]:
    """Canonical order: limit (unbounded = +inf), then request, then label; a task-band arm last."""
    if label == "task-band":  # each task at its own band: not a point on the multiplier axis
        return (np.inf, np.inf, label)
    lim = np.inf if (limit is None or not np.isfinite(limit)) else float(limit)
    return (lim, float(request), str(label))


def aggregate(df: pd.DataFrame, config_order: list[str] | None = None) -> Aggregates:
    """Reduce trial rows to count arrays. Raises ValueError on contract violations.

    ``config_order`` (labels-axis runs: agents, models, imports) keeps the configurations in
    the user's order instead of the canonical resource order; labels it does not
    name follow in order of first appearance.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"trial frame lacks columns: {missing}")
    if len(df) == 0:
        raise ValueError("trial frame is empty")

    out_codes = pd.Index(list(OUTCOMES)).get_indexer(df["outcome"])
    if np.any(out_codes < 0):
        bad = sorted(set(df["outcome"][out_codes < 0].astype(str)))[:5]
        raise ValueError(f"unknown outcome values: {bad}")
    out_codes = out_codes.astype(np.int64)

    cfg_raw, cfg_uniques, first = _factorize_first(df["config_label"])
    req = _col(df, "request_multiplier")
    lim = _col(df, "limit_multiplier")
    keys: list[tuple[float, float] | tuple[float, float, str]]
    if config_order is not None:
        rank = {lab: i for i, lab in enumerate(config_order)}
        keys = [(float(rank.get(str(cfg_uniques[i]), len(rank))), float(first[i])) for i in range(len(cfg_uniques))]
    else:
        keys = [config_sort_key(str(cfg_uniques[i]), req[first[i]], lim[first[i]]) for i in range(len(cfg_uniques))]
    order = sorted(range(len(cfg_uniques)), key=lambda i: keys[i])
    remap = np.empty(len(order), dtype=np.int64)
    remap[order] = np.arange(len(order))
    cfg = remap[cfg_raw]
    for name, arr in (("request_multiplier", req), ("limit_multiplier", lim)):
        per_row = arr[first][cfg_raw]
        if np.any((per_row != arr) & ~(np.isnan(per_row) & np.isnan(arr))):
            raise ValueError(f"a config_label has more than one {name}; labels must identify configurations")
    labels = [str(cfg_uniques[i]) for i in order]
    request = np.array([req[first[i]] for i in order], float)
    limit = np.array([lim[first[i]] for i in order], float)
    c_n = len(labels)

    t_raw, t_uniq, t_first = _factorize_first(df["task_id"])
    t_order = np.argsort(t_uniq.astype(str), kind="stable")  # tasks sorted by id
    t_remap = np.empty(len(t_order), dtype=np.int64)
    t_remap[t_order] = np.arange(len(t_order))
    task_codes = t_remap[t_raw]
    task_uniques = t_uniq[t_order]
    tfirst = t_first[t_order]
    t_n = len(task_uniques)
    if "cluster_id" in df.columns:
        cl = df["cluster_id"].iloc[tfirst].to_numpy(dtype=object)  # pick, then convert: not a million values
        cl = np.where(pd.isna(cl), np.asarray(task_uniques, dtype=object), cl).astype(str)
    else:
        cl = np.asarray(task_uniques, dtype=object).astype(str)
    cl_codes, cl_uniques = pd.factorize(cl, sort=True)

    cell = cfg * t_n + task_codes
    counts = np.bincount(cell * N_OUTCOMES + out_codes, minlength=c_n * t_n * N_OUTCOMES).reshape(c_n, t_n, N_OUTCOMES)

    att = pd.to_numeric(df["attempt"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if np.any(~np.isfinite(att)) or np.any(att < 0):
        raise ValueError("attempt must be a non-negative integer on every row")
    att = att.astype(np.int64)
    a_n = int(att.max()) + 1
    ca = cfg * a_n + att
    is_pass = out_codes == PASSED
    attempt_n = np.bincount(ca, minlength=c_n * a_n).reshape(c_n, a_n)
    attempt_pass = np.bincount(ca[is_pass], minlength=c_n * a_n).reshape(c_n, a_n)

    run_n, run_pass, run_basis = attempt_n, attempt_pass, "attempt index"
    if "source_run" in df.columns and df["source_run"].notna().any():
        runs = pd.factorize(df["source_run"].astype(object).where(df["source_run"].notna(), "(native)"), sort=False)[0]
        r_n = int(runs.max()) + 1
        cr = cfg * r_n + runs
        run_n = np.bincount(cr, minlength=c_n * r_n).reshape(c_n, r_n)
        run_pass = np.bincount(cr[is_pass], minlength=c_n * r_n).reshape(c_n, r_n)
        run_basis = "source runs"

    notes: list[str] = []
    key = (cell.astype(np.int64) * a_n) + att
    n_keys = c_n * t_n * a_n
    if n_keys <= 50_000_000:  # dense count: O(n), no sort
        n_distinct = int(np.count_nonzero(np.bincount(key, minlength=n_keys)))
    else:
        n_distinct = len(np.unique(key))
    n_dup = len(key) - n_distinct
    if n_dup:
        notes.append(f"{n_dup} duplicate (task, config, attempt) rows; each row was counted as a trial")
    per_cell = counts.sum(axis=2)
    ran = per_cell > 0
    if np.any(~ran):
        notes.append(f"{int((~ran).sum())} (config, task) combinations have no trials")
    if ran.any() and per_cell[ran].min() != per_cell[ran].max():
        notes.append(
            f"attempts per (config, task) vary from {int(per_cell[ran].min())} to {int(per_cell[ran].max())}; "
            "pass@k / pass^k stop at the smallest"
        )

    reasons: list[dict[str, int]] = [dict() for _ in range(c_n)]
    infra_rows = np.flatnonzero(out_codes == INFRA)
    if len(infra_rows):
        r = (
            df["reason"].iloc[infra_rows].to_numpy(dtype=object)
            if "reason" in df.columns
            else np.full(len(infra_rows), None)
        )
        r = np.where(pd.isna(r), "unspecified", r).astype(str)
        vc = pd.Series(1, index=pd.MultiIndex.from_arrays([cfg[infra_rows], r])).groupby(level=[0, 1]).sum()
        for (ci, reason), v in vc.items():
            reasons[int(ci)][str(reason)] = int(v)

    def sums(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per config: sum over the rows that reported x, their count, and the passes among them."""
        ok = np.isfinite(x)
        return (
            np.bincount(cfg[ok], weights=x[ok], minlength=c_n),
            np.bincount(cfg[ok], minlength=c_n),
            np.bincount(cfg[ok & is_pass], minlength=c_n),
        )

    duration_sum, duration_n, _ = sums(_col(df, "duration_s"))
    cost_sum, cost_n, cost_pass_n = sums(_col(df, "cost_usd"))
    tin, tout = _col(df, "tokens_in"), _col(df, "tokens_out")
    tin_sum, tin_n, _ = sums(tin)
    tout_sum, tout_n, _ = sums(tout)
    tok_sum, tok_n, tok_pass_n = sums(tin + tout)  # NaN unless both were reported
    gateway = (
        (df["usage_source"] == "gateway").fillna(False).to_numpy(dtype=bool)
        if "usage_source" in df.columns
        else np.zeros(len(df), dtype=bool)
    )
    cost_gw_n = np.bincount(cfg[gateway & np.isfinite(_col(df, "cost_usd"))], minlength=c_n)
    tok_gw_n = np.bincount(cfg[gateway & np.isfinite(tin + tout)], minlength=c_n)

    peak = _col(df, "peak_memory_bytes")
    mlim = _col(df, "memory_limit_bytes")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(mlim > 0, peak / mlim, np.nan)
    nc_cells = c_n * t_n
    pr_max = np.full(nc_cells, np.nan)
    pr_mean = np.full(nc_cells, np.nan)
    pb_max = np.full(nc_cells, np.nan)
    ok = np.isfinite(ratio)
    if np.any(ok):
        s = pd.Series(ratio[ok]).groupby(cell[ok])
        mx, mn = s.max(), s.mean()
        pr_max[mx.index.to_numpy()] = mx.to_numpy()
        pr_mean[mn.index.to_numpy()] = mn.to_numpy()
    okp = np.isfinite(peak)
    if np.any(okp):
        mx = pd.Series(peak[okp]).groupby(cell[okp]).max()
        pb_max[mx.index.to_numpy()] = mx.to_numpy()

    return Aggregates(
        labels=labels,
        request=request,
        limit=limit,
        tasks=[str(t) for t in task_uniques],
        task_cluster=cl_codes.astype(np.int64),
        clusters=[str(c) for c in cl_uniques],
        counts=counts,
        attempt_n=attempt_n,
        attempt_pass=attempt_pass,
        reasons=reasons,
        duration_sum=duration_sum,
        duration_n=duration_n,
        cost_sum=cost_sum,
        cost_n=cost_n,
        cost_pass_n=cost_pass_n,
        tok_in_sum=tin_sum,
        tok_in_n=tin_n,
        tok_out_sum=tout_sum,
        tok_out_n=tout_n,
        tok_sum=tok_sum,
        tok_n=tok_n,
        tok_pass_n=tok_pass_n,
        peak_ratio_max=pr_max.reshape(c_n, t_n),
        peak_ratio_mean=pr_mean.reshape(c_n, t_n),
        peak_bytes_max=pb_max.reshape(c_n, t_n),
        notes=notes,
        cost_gw_n=cost_gw_n,
        tok_gw_n=tok_gw_n,
        run_n=run_n,
        run_pass=run_pass,
        run_basis=run_basis,
    )
