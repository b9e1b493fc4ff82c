"""The runner's termination message: ``key=value`` lines, at most 4 KiB (the kubelet's cap).

Written by ``runner.sh`` after each step, read back from the container status. It
carries each step's exit code, duration, timeout flag, the container cgroup's
OOM-kill counter before and after the step, its CPU time and quota throttling
(deltas of the container cgroup's ``cpu.stat``), the peak memory, the reward file's
content (<= 512 bytes) and the agent's self-report (<= 1500 bytes), so a pod that
is gone still leaves its result in the status the backend harvested.

The agent writes some of what the message carries, so none of it may ever read as a
key of its own: file contents arrive base64-encoded (``agent_result_b64``,
``reward_b64``; as text without control characters when the image has no
``base64``), lines are split on ``"\n"`` only (``str.splitlines`` also splits on
``\v``, ``\f``, ``\x1c``-``\x1e``, ``\x85``, ``\u2028``...), and a message that
names a key twice is not believed: its reward is malformed.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from orchestrator.contract.outputs import REWARD_FILES, parse_agent_result, parse_reward
from orchestrator.spec.evidence import RunnerEvidence
from orchestrator.spec.facts import StepFacts

#: The kubelet keeps at most this much of a container's termination message.
MAX_MESSAGE_BYTES = 4096
MAX_REWARD_BYTES = 512
MAX_AGENT_RESULT_BYTES = 1500
#: A message read from elsewhere (the simulated plane) is cut here before parsing.
_PARSE_LIMIT = 4 * MAX_MESSAGE_BYTES


@dataclass
class RunnerReport:
    fields: dict[str, str] = field(default_factory=dict)
    #: Keys the message named more than once: the runner never does, so it was forged.
    duplicates: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """The runner got past the verifier (or decided to skip it)."""
        return "verifier_exit" in self.fields or "verifier_skipped" in self.fields

    def _int(self, key: str) -> int | None:
        try:
            return int(self.fields[key])
        except (KeyError, ValueError):
            return None

    def step(self, name: str) -> StepFacts | None:
        exit_code = self._int(f"{name}_exit")
        if exit_code is None:
            return None
        oom0, oom1 = self._int(f"{name}_oom0"), self._int(f"{name}_oom1")
        oom = max(0, oom1 - oom0) if oom0 is not None and oom1 is not None and oom0 >= 0 else 0
        cs = self._int(f"{name}_cs") or 0
        timed_out = self.fields.get(f"{name}_timeout") == "1"
        signal = exit_code - 128 if exit_code > 128 else None
        return StepFacts(
            name=name,
            exit_code=None if signal else exit_code,
            signal=signal,
            timed_out=timed_out,
            oom_kills=oom,
            oom_evidence=f"container memory cgroup oom_kill {oom0} -> {oom1}" if oom else None,
            duration_s=cs / 100.0,
        )

    def cpu_time_s(self) -> float | None:
        """The container cgroup's CPU time over both steps (``*_cpu_us``: each step's usage delta)."""
        used = [u for u in (self._int("agent_cpu_us"), self._int("verifier_cpu_us")) if u is not None and u >= 0]
        return sum(used) / 1e6 if used else None

    def cpu_throttling(self) -> dict[str, int]:
        """The quota's counters over both steps, in cgroup v2's names (``*_cpu_thr``: periods,throttled,usec)."""
        total = [0, 0, 0]
        seen = False
        for step in ("agent", "verifier"):
            parts = self.fields.get(f"{step}_cpu_thr", "").split(",")
            try:
                values = [int(p) for p in parts]
            except ValueError:
                continue
            if len(values) == 3 and min(values) >= 0:
                total = [a + b for a, b in zip(total, values)]
                seen = True
        return dict(zip(("nr_periods", "nr_throttled", "throttled_usec"), total)) if seen else {}

    def peak_memory_bytes(self) -> int | None:
        peaks = [p for p in (self._int("agent_peak"), self._int("verifier_peak")) if p is not None and p >= 0]
        return max(peaks) if peaks else None

    def _content(self, key: str, limit: int) -> str | None:
        """A file's content the runner sent as ``KEY_b64`` (or ``KEY`` without base64), or None."""
        if f"{key}_b64" in self.fields:
            try:
                raw = base64.b64decode(self.fields[f"{key}_b64"], validate=True)
            except (binascii.Error, ValueError):
                return None
            return raw[:limit].decode("utf-8", "replace")
        text = self.fields.get(key)
        return None if text is None else text[:limit]

    def reward(self) -> tuple[float | None, str | None]:
        if self.duplicates:
            return None, f"malformed: the runner message names {', '.join(self.duplicates[:5])} more than once"
        name = self.fields.get("reward_file")
        if name is None:
            skipped = self.fields.get("verifier_skipped")
            return (
                None,
                f"missing: verifier not run ({skipped})" if skipped else "missing: no reward.txt or reward.json",
            )
        if name not in REWARD_FILES:
            return None, "malformed: the runner message names no known reward file"
        size = self._int("reward_size") or 0
        text = self._content("reward", MAX_REWARD_BYTES)
        if size > MAX_REWARD_BYTES or text is None:
            return None, f"malformed: {name} is {size} bytes (more than {MAX_REWARD_BYTES})"
        return parse_reward(name, text)

    def agent_result(self) -> dict[str, Any]:
        if self.duplicates:  # nothing of a forged message is believed
            return {}
        text = self._content("agent_result", MAX_AGENT_RESULT_BYTES)
        return parse_agent_result(text) if text else {}

    def evidence(self) -> RunnerEvidence:
        """The keys kept as the try's evidence (``extra.runner``): the evidence model names them."""
        keep = RunnerEvidence.keys()
        out: dict[str, Any] = {k: v for k, v in self.fields.items() if k in keep}
        if self.duplicates:
            out["duplicate_keys"] = self.duplicates[:20]
        return RunnerEvidence.model_validate(out)


def parse(message: str | None) -> RunnerReport | None:
    """A runner report, or None when the message is not one (the runner never got that far)."""
    if not message:
        return None
    fields: dict[str, str] = {}
    duplicates: list[str] = []
    # "\n" only: the runner writes no other line break, and a value may hold any other character.
    for line in message[:_PARSE_LIMIT].split("\n"):
        key, sep, value = line.partition("=")
        if sep and key and key.replace("_", "").isascii() and key.replace("_", "").isalnum():
            if key in fields:
                duplicates.append(key)
            else:
                fields[key] = value
    if fields.get("v") != "1":
        return None
    return RunnerReport(fields, duplicates)


def render(fields: dict[str, Any]) -> str:
    """A message as the runner writes it (for the simulated test plane, where no runner runs)."""
    return "".join(f"{k}={v}\n" for k, v in {"v": 1, **fields}.items())
