"""Shared builders for stats tests: small trial frames in the data contract."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pytest


def frame_from_outcomes(
    outcomes: Sequence[Sequence[str]],
    config_label: str = "1x-strict",
    request: float = 1.0,
    limit: float = 1.0,
    cost: float | None = None,
    duration: float = 1.0,
    task_prefix: str = "t",
    clusters: Sequence[str] | None = None,
) -> pd.DataFrame:
    """outcomes[t][a] = outcome string of task t, attempt a."""
    rows = []
    for t, outs in enumerate(outcomes):
        for a, o in enumerate(outs):
            rows.append(
                {
                    "task_id": f"{task_prefix}{t:03d}",
                    "config_label": config_label,
                    "request_multiplier": request,
                    "limit_multiplier": limit,
                    "attempt": a,
                    "outcome": o,
                    "reason": "oom_killed" if o == "infra_error" else None,
                    "cluster_id": clusters[t] if clusters is not None else f"{task_prefix}{t:03d}",
                    "duration_s": duration,
                    "cost_usd": np.nan if cost is None else cost,
                    "tokens_in": np.nan,
                    "tokens_out": np.nan,
                    "peak_memory_bytes": 1e9,
                    "memory_limit_bytes": 2e9 * limit if np.isfinite(limit) else np.nan,
                }
            )
    return pd.DataFrame(rows)


def frame_from_pass_matrix(passed: np.ndarray, **kw) -> pd.DataFrame:
    """passed[t, a] boolean -> passed/failed trial frame."""
    outs = [["passed" if x else "failed" for x in row] for row in np.asarray(passed, bool)]
    return frame_from_outcomes(outs, **kw)


@pytest.fixture
def from_outcomes() -> Callable[..., pd.DataFrame]:
    return frame_from_outcomes


@pytest.fixture
def from_pass_matrix() -> Callable[..., pd.DataFrame]:
    return frame_from_pass_matrix
