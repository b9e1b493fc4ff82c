"""The runner's termination message: ``key=value`` lines, at most 4 KiB (the kubelet's cap).

Written by ``runner.sh`` after each step, read back from the container status. It
carries each step's exit code, duration, timeout flag, the container cgroup's
OOM-kill counter before and after the step, the peak memory, the reward file's
content (<= 512 bytes) and the agent's self-report (<= 1500 bytes), so a pod that
is gone still leaves its result in the status the backend harvested.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.spec.facts import StepFacts
from orchestrator.trial_outputs import parse_agent_result, parse_reward

#: The kubelet keeps at most this much of a container's termination message.
MAX_MESSAGE_BYTES = 4096
MAX_REWARD_BYTES = 512


@dataclass
class RunnerReport:
    fields: dict[str, str] = field(default_factory=dict)

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
            name=name, exit_code=None if signal else exit_code, signal=signal, timed_out=timed_out,
            oom_kills=oom, oom_evidence=f"container memory cgroup oom_kill {oom0} -> {oom1}" if oom else None,
            duration_s=cs / 100.0,
        )

    def peak_memory_bytes(self) -> int | None:
        peaks = [p for p in (self._int("agent_peak"), self._int("verifier_peak")) if p is not None and p >= 0]
        return max(peaks) if peaks else None

    def reward(self) -> tuple[float | None, str | None]:
        name = self.fields.get("reward_file")
        if name is None:
            skipped = self.fields.get("verifier_skipped")
            return None, f"missing: verifier not run ({skipped})" if skipped else "missing: no reward.txt or reward.json"
        size = self._int("reward_size") or 0
        if size > MAX_REWARD_BYTES or "reward" not in self.fields:
            return None, f"malformed: {name} is {size} bytes (more than {MAX_REWARD_BYTES})"
        return parse_reward(name, self.fields["reward"])

    def agent_result(self) -> dict[str, Any]:
        text = self.fields.get("agent_result")
        return parse_agent_result(text) if text else {}

    def evidence(self) -> dict[str, str]:
        keep = ("workdir", "memcg", "ptrace_scope", "verifier_skipped", "detail", "sweep_left", "truncated",
                "agent_result_size")
        return {k: v for k, v in self.fields.items() if k in keep}


def parse(message: str | None) -> RunnerReport | None:
    """A runner report, or None when the message is not one (the runner never got that far)."""
    if not message:
        return None
    fields: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and key.replace("_", "").isalnum():
            fields.setdefault(key, value)
    if fields.get("v") != "1":
        return None
    return RunnerReport(fields)


def render(fields: dict[str, Any]) -> str:
    """A message as the runner writes it (for the simulated test plane, where no runner runs)."""
    return "".join(f"{k}={v}\n" for k, v in {"v": 1, **fields}.items())
