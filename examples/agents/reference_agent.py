#!/usr/bin/env python3
"""headroom's reference agent: a small tool-calling loop, on the host or inside the trial's environment.

It asks a model (OpenAI chat completions, through headroom's model gateway:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` are the try's) what to do, runs each
``bash`` tool call in the trial's environment, sends the output back, and stops when
the model answers without a tool call or after ``--max-turns``. Its trajectory goes to
``$HEADROOM_LOGS_DIR/trajectory.json`` (ATIF), rewritten after every step, so a
timeout still leaves what happened. Standard library only: run it with any python3.

* On the host (``kind: external``): each command goes through the exec channel
  (``$HEADROOM_EXEC -- bash -c CMD``); the environment stays offline.
* Inside the environment (``kind: command``, this directory as ``agent.path``, so
  ``python3 /agent/reference_agent.py``): each command runs with ``bash -c`` in the
  work dir. It reaches the gateway only where the environment shares the host's
  loopback (the local backend, with ``agent.network: true``).

See the README's example experiment, and docs/agents.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any

SYSTEM = (
    "You are an agent solving a task in a Linux environment. Use the bash tool to run commands there "
    "(working directory: {workdir}). When the task is done, reply with a short summary and no tool call."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in the task's environment; returns exit code and output.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]
#: Output sent back to the model per command (the exec log keeps the full size).
MAX_OBSERVATION = 16_000


def chat(base: str, key: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    req = urllib.request.Request(
        base.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


def run_in_environment(cmd: str, timeout: float) -> tuple[int, str]:
    """One command in the trial's environment: through headroom's exec channel from the host, else directly."""
    if "HEADROOM_EXEC" in os.environ:
        argv = [os.environ["HEADROOM_EXEC"], "--timeout", str(timeout), "--", "bash", "-c", cmd]
        proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
        code, raw = proc.returncode, proc.stdout + proc.stderr
    else:
        code, raw = run_here(cmd, timeout)
    out = raw.decode("utf-8", "replace")
    if len(out) > MAX_OBSERVATION:
        out = out[: MAX_OBSERVATION // 2] + "\n[... cut ...]\n" + out[-MAX_OBSERVATION // 2 :]
    return code, out


def run_here(cmd: str, timeout: float) -> tuple[int, bytes]:
    """``bash -c cmd`` in the work dir, in a process group of its own, all of it killed on timeout (exit 124)."""
    with subprocess.Popen(
        ["bash", "-c", cmd],
        cwd=os.environ.get("HEADROOM_WORKDIR") or None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return 124, out + f"\n[timed out after {timeout:g} s]".encode()


class Trajectory:
    """ATIF (Harbor's trajectory format), written whole after each step."""

    def __init__(self, path: str | None, model: str) -> None:
        self.path = path
        self.doc: dict[str, Any] = {
            "schema_version": "ATIF-v1.4",
            "session_id": os.environ.get("HEADROOM_TRIAL_ID"),
            "agent": {"name": "headroom-reference-agent", "version": "1", "model_name": model},
            "steps": [],
        }

    def add(self, source: str, message: str, **extra: Any) -> None:
        step = {
            "step_id": len(self.doc["steps"]) + 1,
            "timestamp": datetime.now(UTC).isoformat(),
            "source": source,
            "message": message,
            **extra,
        }
        self.doc["steps"].append(step)
        self.save()

    def save(self) -> None:
        if self.path:
            tmp = self.path + ".partial"
            with open(tmp, "w") as f:
                json.dump(self.doc, f, indent=1)
            os.replace(tmp, self.path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=os.environ.get("HEADROOM_AGENT_MODEL", "gpt-4.1-mini"))
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--command-timeout", type=float, default=120.0)
    p.add_argument("--request-timeout", type=float, default=300.0)
    args = p.parse_args()
    base, key = os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY")
    if not base or not key:
        print(
            "reference_agent: needs OPENAI_BASE_URL and OPENAI_API_KEY (a gateway with an openai upstream)",
            file=sys.stderr,
        )
        return 2
    logs = os.environ.get("HEADROOM_LOGS_DIR")
    traj = Trajectory(os.path.join(logs, "trajectory.json") if logs else None, args.model)
    instruction = os.environ.get("HEADROOM_INSTRUCTION", "")
    system = SYSTEM.format(workdir=os.environ.get("HEADROOM_WORKDIR", "/app"))
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": instruction}]
    traj.add("system", system)
    traj.add("user", instruction)
    for _turn in range(args.max_turns):
        try:
            resp = chat(base, key, {"model": args.model, "messages": messages, "tools": TOOLS}, args.request_timeout)
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            print(f"reference_agent: model call failed: {exc}", file=sys.stderr)
            return 1
        msg = resp["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        messages.append(
            {"role": "assistant", "content": msg.get("content"), **({"tool_calls": calls} if calls else {})}
        )
        usage = resp.get("usage") or {}
        metrics = {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}
        results = []
        for call in calls:
            try:
                cmd = json.loads(call["function"]["arguments"]).get("cmd", "")
            except (ValueError, AttributeError):
                cmd = ""
            code, out = run_in_environment(cmd, args.command_timeout)
            content = f"exit code {code}\n{out}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            results.append({"source_call_id": call["id"], "content": content})
        traj.add(
            "agent",
            msg.get("content") or "",
            model_name=resp.get("model", args.model),
            metrics=metrics,
            tool_calls=[
                {
                    "tool_call_id": c["id"],
                    "function_name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                }
                for c in calls
            ],
            **({"observation": {"results": results}} if results else {}),
        )
        if not calls:
            print(msg.get("content") or "")
            return 0
    print(f"reference_agent: stopped after {args.max_turns} turns", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
