"""Calibrating an LLM judge before its verdicts grade anything.

A judge compares two responses to one prompt and names the better one. Before
trusting it, headroom measures on pairs the user supplies:

* **order consistency**: every pair is judged in both orders; a consistent judge
  prefers the same response both times;
* **position bias**: of the inconsistent pairs, how often the judge simply picked
  the same position twice (first or second), with a binomial test against 50/50;
* **agreement with humans** where pairs carry a human label: Cohen's kappa with
  its 95% interval (statsmodels);
* **length bias** once position is controlled: among order-consistent verdicts
  between responses of different length, how often the longer one wins, with a
  binomial test; and, where humans labelled, the same rate for the humans.

The judge is any OpenAI-compatible chat-completions endpoint, called through
httpx. Its API key is read from an environment variable whose NAME is given;
the value never reaches a result.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError
from scipy.stats import binomtest
from statsmodels.stats.inter_rater import cohens_kappa

from orchestrator.errors import UserError
from orchestrator.spec.unknown import first_validation_error

Choice = Literal["a", "b"]
PROMPT = (
    "You are comparing two responses to the same task. Answer with exactly one letter: "
    "A if Response A is better, B if Response B is better.\n\n"
    "Task:\n{prompt}\n\nResponse A:\n{first}\n\nResponse B:\n{second}\n"
)
_LETTER = re.compile(r"\b([AB])\b")


class Pair(BaseModel):
    """One line of the pairs file."""

    model_config = ConfigDict(extra="ignore")

    id: str
    prompt: str
    response_a: str
    response_b: str
    human: Choice | None = None


def load_pairs(path: Path) -> list[Pair]:
    pairs = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read ({exc})", file=str(path)) from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            pairs.append(Pair.model_validate_json(line))
        except ValidationError as exc:
            fld, msg = first_validation_error(exc)
            raise UserError(f"line {n}: {msg}", file=str(path), field=fld) from None
    if not pairs:
        raise UserError("no pairs", file=str(path))
    return pairs


@dataclass
class Judge:
    """An OpenAI-compatible endpoint used as a pairwise judge."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 60.0
    calls: int = field(default=0, init=False)

    def _client(self) -> httpx.Client:
        headers = {}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise UserError(f"environment variable {self.api_key_env} is not set", field="--api-key-env")
            headers["Authorization"] = f"Bearer {key}"
        return httpx.Client(base_url=self.base_url.rstrip("/"), headers=headers, timeout=self.timeout_s)

    def prefer(self, client: httpx.Client, prompt: str, first: str, second: str) -> Literal["first", "second"] | None:
        """Which position the judge prefers; None when its answer names neither."""
        self.calls += 1
        try:
            resp = client.post(
                "/chat/completions",
                json={
                    "model": self.model,
                    "temperature": 0,
                    "messages": [{"role": "user", "content": PROMPT.format(prompt=prompt, first=first, second=second)}],
                },
            )
            resp.raise_for_status()
            text = resp.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise UserError(
                f"the judge endpoint failed: {type(exc).__name__}: {str(exc)[:200]}", field="--endpoint"
            ) from None
        m = _LETTER.search(str(text).strip().upper())
        return None if m is None else ("first" if m.group(1) == "A" else "second")


@dataclass(frozen=True)
class Judged:
    pair: Pair
    ab: Literal["first", "second"] | None  # order (a, b)
    ba: Literal["first", "second"] | None  # order (b, a)

    @property
    def consistent_choice(self) -> Choice | None:
        """The response preferred in both orders, or None."""
        if self.ab is None or self.ba is None:
            return None
        first: Choice = "a" if self.ab == "first" else "b"
        second: Choice = "b" if self.ba == "first" else "a"
        return first if first == second else None


def judge_pairs(judge: Judge, pairs: list[Pair]) -> list[Judged]:
    with judge._client() as client:
        return [
            Judged(
                p,
                judge.prefer(client, p.prompt, p.response_a, p.response_b),
                judge.prefer(client, p.prompt, p.response_b, p.response_a),
            )
            for p in pairs
        ]


def _rate(k: int, n: int) -> dict[str, Any]:
    if n == 0:
        return {"rate": None, "k": 0, "n": 0, "p_value_vs_half": None}
    return {"rate": k / n, "k": k, "n": n, "p_value_vs_half": float(binomtest(k, n, 0.5).pvalue)}


def calibrate(judged: list[Judged]) -> dict[str, Any]:
    n = len(judged)
    answered = [j for j in judged if j.ab is not None and j.ba is not None]
    consistent = [j for j in answered if j.consistent_choice is not None]
    inconsistent = [j for j in answered if j.consistent_choice is None]
    first_twice = sum(1 for j in inconsistent if j.ab == "first")
    out: dict[str, Any] = {
        "pairs": n,
        "unparseable_verdicts": sum((j.ab is None) + (j.ba is None) for j in judged),
        "order_consistency": _rate(len(consistent), len(answered)),
        # An inconsistent judge picked the same position twice: first twice or second twice.
        "position_bias": {
            **_rate(first_twice, len(inconsistent)),
            "favoured": (
                None
                if not inconsistent
                else "first"
                if first_twice * 2 > len(inconsistent)
                else "second"
                if first_twice * 2 < len(inconsistent)
                else "neither"
            ),
        },
    }
    labelled = [j for j in consistent if j.pair.human is not None]
    if labelled:
        table = np.zeros((2, 2))
        for j in labelled:
            table["ab".index(j.consistent_choice), "ab".index(j.pair.human)] += 1  # type: ignore[arg-type, index]
        if table.sum(axis=0).min() == 0 and table.sum(axis=1).min() == 0 and np.trace(table) == table.sum():
            kappa = {"kappa": 1.0, "ci95": [1.0, 1.0], "n": len(labelled)}
        else:
            k = cohens_kappa(table)
            kappa = {"kappa": float(k.kappa), "ci95": [float(k.kappa_low), float(k.kappa_upp)], "n": len(labelled)}
        out["human_agreement"] = {
            **kappa,
            "raw_agreement": float(np.trace(table) / table.sum()),
            "excluded_inconsistent_or_unlabelled": n - len(labelled),
        }
    differing = [j for j in consistent if len(j.pair.response_a) != len(j.pair.response_b)]
    longer = lambda j: "a" if len(j.pair.response_a) > len(j.pair.response_b) else "b"  # noqa: E731
    out["length_bias"] = {
        "judge_prefers_longer": _rate(sum(1 for j in differing if j.consistent_choice == longer(j)), len(differing))
    }
    humans = [j for j in judged if j.pair.human is not None and len(j.pair.response_a) != len(j.pair.response_b)]
    if humans:
        out["length_bias"]["humans_prefer_longer"] = _rate(
            sum(1 for j in humans if j.pair.human == longer(j)), len(humans)
        )
    return out


def write_report(report: dict[str, Any], path: Path | None) -> str:
    text = json.dumps(report, indent=2, sort_keys=True)
    if path:
        path.write_text(text + "\n")
    return text
