"""What every results reader hands over: trials in headroom's taxonomy, and an account of every file read.

Every file an import reads gets a :class:`FileRecord`: what it held (trials or metadata) and
what became of each trial in it (imported, a duplicate of another file's trial, or skipped
with a reason). The import summary is built from these records, so nothing read can vanish
from it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.agentio import safejson
from orchestrator.store.records import content_digest

#: A result file written by another harness: larger than an agent's self-report, still bounded.
IMPORT_MAX_BYTES = 64 * 1024 * 1024

IMPORTED, DUPLICATE, SKIPPED, METADATA = "imported", "duplicate", "skipped", "metadata"


@dataclass(eq=False)
class FileRecord:
    """One file an import read, and what became of what it held."""

    path: Path
    shown: str  # the path as the summary shows it (relative to the path the user gave)
    sha256: str | None = None
    role: str = "trials"  # trials | metadata
    error: str | None = None  # why the file itself could not be used (malformed, unreadable, unknown shape)
    trials: int = 0  # trial entries read from it
    imported: int = 0
    duplicates: Counter[str] = field(default_factory=Counter)  # the file holding the first copy -> trials
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> trials

    @property
    def status(self) -> str:
        if self.error:
            return SKIPPED
        if self.role == METADATA:
            return METADATA
        if self.imported and not (self.duplicates or self.skipped):
            return IMPORTED
        if self.duplicates and not (self.imported or self.skipped):
            return DUPLICATE
        if self.skipped and not (self.imported or self.duplicates):
            return SKIPPED
        if not self.trials:
            return "empty"
        return "partly imported"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.shown,
            "sha256": self.sha256,
            "role": self.role,
            "status": self.status,
            "error": self.error,
            "trials": self.trials,
            "imported": self.imported,
            "duplicates": dict(self.duplicates),
            "skipped": dict(self.skipped),
        }


def read_json_file(path: Path, shown: str) -> tuple[FileRecord, Any]:
    """Read and parse one JSON file; a file that cannot be read or parsed is recorded, never raised."""
    rec = FileRecord(path=path, shown=shown)
    try:
        data = path.read_bytes()
    except OSError as exc:
        rec.error = f"cannot read ({exc.strerror or exc})"
        return rec, None
    rec.sha256 = hashlib.sha256(data).hexdigest()
    try:
        # Depth-bounded (a crafted file must not crash the import); the size is bounded too.
        return rec, safejson.loads(data, max_bytes=IMPORT_MAX_BYTES)
    except (ValueError, UnicodeDecodeError) as exc:
        rec.error = f"malformed JSON ({str(exc).splitlines()[0][:200]})"
        return rec, None


@dataclass(eq=False)
class SourceTrial:
    trial_name: str
    trial_uid: str | None
    task_id: str
    label: str  # the configuration: agent@model (or the submission's name)
    outcome: str
    reason: str | None
    reward: float | None
    rule: str
    source_resolved: bool  # the source harness's own verdict (what its accuracy counts)
    started_at: str | None = None  # None when the source recorded no time: stored as NULL
    finished_at: str | None = None
    duration_s: float | None = None
    tokens_in: float | None = None
    tokens_out: float | None = None
    cost_usd: float | None = None
    task_digest: str | None = None
    task_source: str | None = None  # the dataset the task came from, as the source names it
    enforcement: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    file: str = ""  # the file it was read from, as shown
    record: FileRecord | None = None  # that file's record (imported / duplicate / skipped are counted there)
    source_error: str | None = None  # the source's own error label: a Harbor exception type or a TB failure mode
    agent_key: str | None = None  # what splits a group into configurations (see results.plan)
    model: str | None = None  # the model the source names for it (None: not recorded)


@dataclass(eq=False)  # compared by identity: two sources are never 'equal'
class Source:
    """One run or job: a Terminal-Bench run (directory or ``<prefix>_results.json`` file) or a Harbor job."""

    path: Path  # the run directory, the job directory, or the run file
    format: str  # harbor-job | terminal-bench-run
    harness: str
    harness_version: str | None
    name: str = ""  # unique within an import: the path relative to what the user gave
    group: Path | None = None  # the submission this source belongs to (see discover.group_of)
    group_name: str = ""
    files: list[FileRecord] = field(default_factory=list)
    reported: dict[str, Any] = field(default_factory=dict)  # the source's own numbers (accuracy by label, ...)
    details: dict[str, Any] = field(default_factory=dict)  # dataset, n_attempts, config overrides, ...
    trials: list[SourceTrial] = field(default_factory=list)  # every trial read (duplicates included)
    kept: list[SourceTrial] = field(default_factory=list)  # what was imported
    problems: list[str] = field(default_factory=list)  # warnings: nothing was skipped for them

    def rules(self) -> Counter[str]:
        return Counter(t.rule for t in self.trials)

    @property
    def files_sha256(self) -> dict[str, str]:
        return {f.shown: f.sha256 for f in self.files if f.sha256}

    @property
    def digest(self) -> str:
        """What identifies the source: a digest of the content of every file read (see :func:`content_digest`)."""
        return content_digest(self.files_sha256.values())


def seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        a = datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    if (a.tzinfo is None) != (b.tzinfo is None):
        return None
    return max(0.0, (b - a).total_seconds())


def time_or_none(value: Any) -> str | None:
    """A recorded time as text, or None (never ''): a missing or blank time is not a time."""
    return value if isinstance(value, str) and value.strip() else None


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
