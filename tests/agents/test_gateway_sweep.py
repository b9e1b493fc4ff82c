"""A real sweep (local backend) whose agent calls a scripted model through the gateway: the try's tokens and
cost come from the gateway, its calls are an artifact, its key is redacted, and the report says "gateway"."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.artifacts import names, reader
from tests.agents.fake_model import FakeModel, Reply
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task

UPSTREAM_KEY = "sk-upstream-e2e-0123456789abcdefghij"

# A tiny tool-calling agent: the scripted model asks for one command, then answers.
AGENT = r"""python3 - <<'PY'
import json, os, subprocess, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
print("my key is", key)
messages = [{"role": "user", "content": os.environ["HEADROOM_INSTRUCTION"]}]
for _ in range(4):
    body = json.dumps({"model": "fake-model-1", "messages": messages, "stream": True}).encode()
    req = urllib.request.Request(base + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    text, calls = "", []
    for line in urllib.request.urlopen(req):
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices", []):
            text += choice["delta"].get("content") or ""
            calls += choice["delta"].get("tool_calls") or []
    messages.append({"role": "assistant", "content": text, "tool_calls": calls})
    if not calls:
        break
    for c in calls:
        out = subprocess.run(json.loads(c["function"]["arguments"])["cmd"], shell=True, capture_output=True, text=True)
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": out.stdout})
if "42" in text:
    open(os.environ["HEADROOM_WORKDIR"] + "/out", "w").write(text)
PY
"""


def test_a_sweep_through_the_gateway_is_measured_and_recorded(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    task = write_task(root, "answer", solve="true\n")
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]\n", "[environment]\nallow_internet = true\n", 1))
    store = tmp_path / "h.db"
    script = [
        Reply("looking", tool_calls=[{"name": "bash", "arguments": {"cmd": "echo hello"}}]),
        Reply("the answer is 42"),
    ]
    with FakeModel(script, openai_key=UPSTREAM_KEY) as fake:
        experiment = {
            "tasks_dir": str(root),
            "configurations": ["1"],
            "attempts": 2,
            "concurrency": 1,
            "allow_internet": True,
            "agent": {"command": AGENT},
            "gateway": {
                "openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP_OPENAI"},
                "prices": {"fake-model-1": {"input": 3.0, "output": 15.0}},
            },
        }
        spec = tmp_path / "exp.yaml"
        spec.write_text(yaml.safe_dump(experiment))
        env = {**os.environ, "UP_OPENAI": UPSTREAM_KEY}
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "orchestrator",
                "sweep",
                "--experiment",
                str(spec),
                "--store",
                str(store),
                "--format",
                "markdown",
                "--no-canary",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert res.returncode == 0, res.stderr
        assert all(s.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for s in fake.seen) and len(fake.seen) == 4

    db = sqlite3.connect(store)
    db.row_factory = sqlite3.Row
    tries = db.execute("SELECT * FROM executions ORDER BY trial_id").fetchall()
    assert [t["outcome"] for t in tries] == ["passed", "passed"]
    for t in tries:
        calls = db.execute("SELECT * FROM model_calls WHERE trial_id=? AND try=?", (t["trial_id"], t["try"])).fetchall()
        assert len(calls) == 2 and all(c["streamed"] == 1 and c["status"] == 200 for c in calls)
        assert t["usage_source"] == "gateway"
        assert t["tokens_in"] == sum(c["tokens_in"] for c in calls) > 0
        assert t["cost_usd"] == sum(c["cost_usd"] for c in calls) > 0
        evidence = json.loads(db.execute("SELECT json FROM evidence WHERE trial_id=?", (t["trial_id"],)).fetchone()[0])
        assert evidence["model_usage"]["calls"] == 2
        # The agent printed its per-try key: it is redacted like any secret.
        assert "my key is [REDACTED]" in evidence["agent"]["stdout_tail"] and "hr-try-" not in json.dumps(evidence)
        kept = {a.name: a for a in reader.list_artifacts(db, t["run_id"], t["trial_id"], t["try"])}
        assert evidence["extra"]["artifacts"]["count"] == len(kept)
        assert {names.MODEL_CALLS, names.AGENT_STDOUT, names.AGENT_STDERR} <= set(kept)
        art = kept[names.MODEL_CALLS]
        assert art.status == "stored"
        # the agent's complete stdout is kept, its printed key redacted there too
        assert b"my key is [REDACTED]" in reader.read(db, kept[names.AGENT_STDOUT].sha256 or "")
        lines = [json.loads(x) for x in reader.read(db, art.sha256 or "").decode().splitlines()]
        assert [x["tokens_in"] for x in lines] == [c["tokens_in"] for c in calls]
        assert '"content": "42 "' in lines[-1]["response"]  # the stream as the agent got it
    db.close()
    assert "gateway" in res.stdout  # the report's cost table says where the figures come from
    for f in tmp_path.glob("h.db*"):
        assert UPSTREAM_KEY.encode() not in f.read_bytes()
    assert UPSTREAM_KEY not in res.stdout + res.stderr


@pytest.mark.parametrize(
    "extra, why",
    [
        # a local sandbox without the network has a loopback of its own: every call would be ECONNREFUSED
        ({}, "which a command agent reaches only with the network: set agent.network: true"),
        ({"allow_internet": True, "agent": {"command": AGENT, "network": False}}, "reaches only with the network"),
        # a container's or a pod's loopback is not the host's, whatever the network
        ({"allow_internet": True, "backend": "docker"}, "which a command agent inside a Docker container cannot reach"),
        ({"allow_internet": True, "backend": "kubernetes"}, "which a command agent inside a pod cannot reach"),
    ],
)
def test_a_command_agent_that_cannot_reach_the_gateway_is_refused_before_the_sweep(
    tmp_path: Path, extra: dict, why: str
) -> None:
    write_task(tmp_path / "tasks", "answer", solve="true\n")
    experiment = {
        "tasks_dir": str(tmp_path / "tasks"),
        "configurations": ["1"],
        "attempts": 1,
        "agent": {"command": AGENT},
        "gateway": {"openai": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "UP_OPENAI"}},
        **extra,
    }
    spec = tmp_path / "exp.yaml"
    spec.write_text(yaml.safe_dump(experiment))
    store = tmp_path / "h.db"
    res = run_cli(
        "sweep",
        "--experiment",
        str(spec),
        "--store",
        str(store),
        "--format",
        "none",
        "--no-canary",
        env={"UP_OPENAI": UPSTREAM_KEY},
    )
    assert res.returncode == 2, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: gateway: the model gateway listens on this host's loopback") and why in last, last
    assert "Traceback" not in res.stderr
    assert not store.exists()  # refused before anything was written: no trial recorded with a "measured" zero


def test_a_gateway_is_refused_only_for_agents_that_cannot_reach_it() -> None:
    from orchestrator.engine.preflight import gateway_problem
    from orchestrator.spec.experiment import Experiment

    gw = {"openai": {"base_url": "http://127.0.0.1:9/v1"}}
    ok = [{"agent": {"kind": "external", "command": "a"}, "backend": b} for b in ("local", "docker", "kubernetes")]
    ok += [
        {"agent": {"command": "a", "network": True}},
        {"agent": {"command": "a"}, "allow_internet": True},
        {"agent": {"kind": "oracle"}, "backend": "docker"},
    ]
    for fields in ok:
        assert gateway_problem(Experiment.model_validate({"tasks_dir": ".", "gateway": gw, **fields})) is None, fields
    # without a gateway nothing is refused for it
    assert (
        gateway_problem(Experiment.model_validate({"tasks_dir": ".", "agent": {"command": "a"}, "backend": "docker"}))
        is None
    )
