"""A trajectory the agent wrote, read for the viewer: ATIF (Harbor's trajectory.json) or a list of chat messages.

* ATIF: ``{"schema_version": "ATIF-v1.x", "agent": {...}, "steps": [{"step_id", "source", "message",
  "reasoning_content", "tool_calls": [{"tool_call_id", "function_name", "arguments"}],
  "observation": {"results": [{"source_call_id", "content"}]}, "metrics": {"prompt_tokens",
  "completion_tokens", "cached_tokens", "cost_usd"}}], "final_metrics": {...}}``;
* chat messages, as OpenAI- and Anthropic-style agents keep them (mini-swe-agent's ``messages``, a bare
  list): ``{"role", "content"}`` where content is text or a list of parts (``text``, ``tool_use``,
  ``tool_result``), with OpenAI ``tool_calls`` and ``role: tool`` results.

The file came from the agent: it is parsed with :mod:`orchestrator.agentio.safejson` (bounded size and depth),
every field is optional, and anything unexpected is shown as text rather than refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from orchestrator.agentio import safejson

MAX_BYTES = 32 * 1024 * 1024
MAX_STEPS = 5000
MAX_TEXT = 256 * 1024


@dataclass
class ToolCall:
    id: str | None
    name: str
    arguments: str


@dataclass
class Observation:
    call_id: str | None
    content: str


@dataclass
class Step:
    index: int
    role: str  # system | user | agent | assistant | tool | ...
    message: str = ""
    reasoning: str = ""
    model: str | None = None
    timestamp: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    format: str  # ATIF-v1.4 | chat-messages
    steps: list[Step]
    agent: dict[str, Any] = field(default_factory=dict)
    totals: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        out = value
    elif isinstance(value, list):  # content parts
        out = "\n".join(
            _text(p.get("text", p.get("content")))
            if isinstance(p, dict) and p.get("type") in (None, "text", "input_text", "output_text", "tool_result")
            else ""
            for p in value
        ).strip("\n")
        if not out:
            out = json.dumps(value, ensure_ascii=False)
    else:
        out = json.dumps(value, ensure_ascii=False, indent=1) if isinstance(value, dict) else str(value)
    return out if len(out) <= MAX_TEXT else out[:MAX_TEXT] + f"\n… ({len(out) - MAX_TEXT} more characters)"


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return _text(value)
    return _text(json.dumps(value, ensure_ascii=False, indent=1))


def _metrics(m: Any) -> dict[str, Any]:
    if not isinstance(m, dict):
        return {}
    keys = ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "input_tokens", "output_tokens")
    return {k: m[k] for k in keys if isinstance(m.get(k), (int, float)) and not isinstance(m.get(k), bool)}


def _atif(doc: dict[str, Any]) -> Trajectory:
    steps: list[Step] = []
    for i, s in enumerate(doc.get("steps") or []):
        if not isinstance(s, dict):
            steps.append(Step(i + 1, "?", _text(s)))
            continue
        calls = [
            ToolCall(c.get("tool_call_id"), str(c.get("function_name") or "?"), _arguments(c.get("arguments")))
            for c in s.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        obs = cast("dict[str, Any]", s.get("observation") if isinstance(s.get("observation"), dict) else {})
        results = [
            Observation(r.get("source_call_id"), _text(r.get("content", r.get("subagent_trajectory_ref"))))
            for r in obs.get("results") or []
            if isinstance(r, dict)
        ]
        steps.append(
            Step(
                int(s["step_id"]) if isinstance(s.get("step_id"), int) else i + 1,
                str(s.get("source") or "?"),
                _text(s.get("message")),
                _text(s.get("reasoning_content")),
                s.get("model_name"),
                s.get("timestamp"),
                calls,
                results,
                _metrics(s.get("metrics")),
            )
        )
    final = cast("dict[str, Any]", doc.get("final_metrics") if isinstance(doc.get("final_metrics"), dict) else {})
    totals = {
        k: final[k]
        for k in (
            "total_prompt_tokens",
            "total_completion_tokens",
            "total_cached_tokens",
            "total_cost_usd",
            "total_steps",
        )
        if k in final
    }
    agent = cast("dict[str, Any]", doc.get("agent") if isinstance(doc.get("agent"), dict) else {})
    return Trajectory(
        str(doc.get("schema_version") or "ATIF"),
        steps,
        {k: agent[k] for k in ("name", "version", "model_name") if k in agent},
        totals,
    )


def _chat(messages: list[Any]) -> Trajectory:
    steps: list[Step] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            steps.append(Step(i + 1, "?", _text(m)))
            continue
        content = m.get("content")
        calls = [
            ToolCall(
                c.get("id"),
                str((c.get("function") or {}).get("name") or c.get("name") or "?"),
                _arguments((c.get("function") or {}).get("arguments", c.get("arguments"))),
            )
            for c in m.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        results: list[Observation] = []
        if isinstance(content, list):  # Anthropic-style parts
            calls += [
                ToolCall(p.get("id"), str(p.get("name") or "?"), _arguments(p.get("input")))
                for p in content
                if isinstance(p, dict) and p.get("type") == "tool_use"
            ]
            results += [
                Observation(p.get("tool_use_id"), _text(p.get("content")))
                for p in content
                if isinstance(p, dict) and p.get("type") == "tool_result"
            ]
            content = [p for p in content if not (isinstance(p, dict) and p.get("type") in ("tool_use", "tool_result"))]
        role = str(m.get("role") or "?")
        if role == "tool":
            results.append(Observation(m.get("tool_call_id"), _text(content)))
            content = None
        steps.append(
            Step(
                i + 1,
                role,
                _text(content),
                _text(m.get("reasoning_content") or m.get("thinking")),
                m.get("model"),
                m.get("timestamp"),
                calls,
                results,
                _metrics(m.get("usage")),
            )
        )
    return Trajectory("chat-messages", steps)


def parse(data: bytes) -> Trajectory | None:
    """The trajectory in ``data``, or None if it is not one of the formats above."""
    if len(data) > MAX_BYTES or data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        doc = safejson.loads(data, max_bytes=MAX_BYTES)
    except ValueError:
        return None
    if (
        isinstance(doc, dict)
        and isinstance(doc.get("steps"), list)
        and (str(doc.get("schema_version", "")).startswith("ATIF") or isinstance(doc.get("agent"), dict))
    ):
        t = _atif(doc)
    elif isinstance(doc, dict) and isinstance(doc.get("messages"), list) and _looks_chat(doc["messages"]):
        t = _chat(doc["messages"])
    elif isinstance(doc, list) and doc and _looks_chat(doc):
        t = _chat(doc)
    else:
        return None
    if len(t.steps) > MAX_STEPS:
        t.notes.append(f"showing the first {MAX_STEPS} of {len(t.steps)} steps")
        t.steps = t.steps[:MAX_STEPS]
    if not t.totals:
        sums = {
            k: sum(s.metrics.get(k, 0) for s in t.steps) for k in ("prompt_tokens", "completion_tokens", "cost_usd")
        }
        t.totals = {f"total_{k}": v for k, v in sums.items() if any(k in s.metrics for s in t.steps)}
    return t


def _looks_chat(items: list[Any]) -> bool:
    return any(isinstance(m, dict) and "role" in m for m in items[:10])
