"""What every results reader hands over: trials in headroom's taxonomy, plus what was read and how."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator import safejson
from orchestrator.errors import UserError


@dataclass
class SourceTrial:
    trial_name: str
    trial_uid: str | None
    task_id: str
    label: str  # the configuration: agent@model
    outcome: str
    reason: str | None
    reward: float | None
    rule: str
    source_resolved: bool  # the source harness's own verdict (what its accuracy counts)
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    tokens_in: float | None = None
    tokens_out: float | None = None
    cost_usd: float | None = None
    task_digest: str | None = None
    task_source: str | None = None  # the dataset the task came from, as the source names it
    enforcement: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    file: str = ""


@dataclass
class Source:
    path: Path
    format: str  # harbor-job | terminal-bench-run
    harness: str
    harness_version: str | None
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    reported: dict[str, Any] = field(default_factory=dict)  # the source's own numbers (accuracy by label, ...)
    details: dict[str, Any] = field(default_factory=dict)  # dataset, n_attempts, config overrides, ...
    trials: list[SourceTrial] = field(default_factory=list)  # everything read
    kept: list[SourceTrial] = field(default_factory=list)  # what was imported (duplicates left out)
    problems: list[str] = field(default_factory=list)

    def read_json(self, rel: str) -> Any:
        """Read a JSON file of this source and record its digest (provenance)."""
        p = self.path / rel
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read ({exc.strerror})", file=str(p)) from None
        self.files[rel] = hashlib.sha256(data).hexdigest()
        try:
            # Depth-bounded (a crafted file must not crash the import); the size is the file's own.
            return safejson.loads(data, max_bytes=max(len(data), safejson.MAX_BYTES))
        except (ValueError, UnicodeDecodeError) as exc:
            raise UserError(f"malformed JSON ({exc})", file=str(p)) from None

    def rules(self) -> Counter[str]:
        return Counter(t.rule for t in self.trials)


def seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        a = datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    if (a.tzinfo is None) != (b.tzinfo is None):
        return None
    return max(0.0, (b - a).total_seconds())


def number(x: Any) -> float | None:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return None
    try:
        return float(x)
    except OverflowError:  # an integer of hundreds of digits in a file someone else wrote
        return None


def label_for(agent: str | None, model: str | None) -> str:
    agent = agent or "unknown-agent"
    return f"{agent}@{model}" if model else agent
