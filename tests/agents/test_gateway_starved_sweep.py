"""Real sweeps (local backend, the headroom CLI) whose agent calls a fake provider on loopback through the gateway
(tests/agents/fake_model.py: a model provider cannot run here). The provider fails as real ones do: a try it
starved is ``infra_error(model_unavailable)`` with the calls as evidence, and its retry waits for the provider; a
try that spent its token limit is ``failed(token_limit)``; a run whose provider fails most calls pauses, says so,
and ``headroom resume`` finishes it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.agents.fake_model import FakeModel, Reply
from tests.agents.test_gateway_failures import ANTHROPIC_CREDIT, OPENAI_QUOTA, OPENAI_RATE
from tests.cli_run import headroom as run_cli
from tests.taskfactory import write_task

UPSTREAM_KEY = "sk-upstream-starved-0123456789abcdef"

# The agent asks its model until the reply holds the answer; it gives up on the first error, as many do.
AGENT = r"""python3 - <<'PY'
import json, os, sys, time, urllib.error, urllib.request
instruction = os.environ["HEADROOM_INSTRUCTION"]
anthropic = "anthropic" in instruction
messages = [{"role": "user", "content": instruction}]
for _ in range(4):
    if anthropic:
        url, headers = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", {"x-api-key": os.environ["ANTHROPIC_API_KEY"]}
        body = {"model": "fake-model-1", "max_tokens": 100, "messages": messages}
    else:
        url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
        headers, body = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}, {"model": "fake-model-1", "messages": messages}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={**headers, "Content-Type": "application/json"})
    try:
        doc = json.load(urllib.request.urlopen(req))
    except urllib.error.HTTPError as exc:
        print("model call failed:", exc.code, exc.read()[:200])
        sys.exit(1)
    text = doc["content"][0]["text"] if anthropic else doc["choices"][0]["message"]["content"]
    messages.append({"role": "assistant", "content": text})
    if "42" in text:
        open(os.environ["HEADROOM_WORKDIR"] + "/out", "w").write(text)
        break
    if "wait" in text:
        time.sleep(3)  # works on its own for a while, without its model
    messages.append({"role": "user", "content": "go on"})
PY
"""

CLI = [sys.executable, "-m", "orchestrator"]


def tasks(root: Path, names: list[str]) -> None:
    for name in names:
        toml = write_task(root, name, solve="true\n") / "task.toml"
        toml.write_text(toml.read_text().replace("[environment]\n", "[environment]\nallow_internet = true\n", 1))


def experiment(tmp: Path, fake: FakeModel, **extra: Any) -> Path:
    gateway = {
        "openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP_KEY"},
        "anthropic": {"base_url": fake.url, "api_key_env": "UP_KEY"},
        "prices": {"fake-model-1": {"input": 3.0, "output": 15.0}},
        "timeout_s": 1.0,  # the hanging provider's calls time out
        **extra.pop("gateway", {}),
    }
    spec = {
        "tasks_dir": str(tmp / "tasks"),
        "configurations": ["1"],
        "attempts": 1,
        "allow_internet": True,
        "agent": {"command": AGENT},
        "gateway": gateway,
        **extra,
    }
    path = tmp / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def headroom(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"UP_KEY": UPSTREAM_KEY})


def tries(store: Path) -> dict[str, list[dict[str, Any]]]:
    db = sqlite3.connect(store)
    db.row_factory = sqlite3.Row
    out: dict[str, list[dict[str, Any]]] = {}
    for r in db.execute(
        "SELECT e.*, t.task_id, v.json AS evidence FROM executions e JOIN trials t USING (run_id, trial_id) "
        "LEFT JOIN evidence v ON v.run_id = e.run_id AND v.trial_id = e.trial_id AND v.try = e.try "
        "ORDER BY e.try"
    ):
        row = dict(r)
        row["evidence"] = json.loads(row["evidence"] or "{}")
        out.setdefault(row["task_id"], []).append(row)
    db.close()
    return out


def test_starved_tries_are_infrastructure_retried_after_the_providers_wait(tmp_path: Path) -> None:
    starving = {
        "rate-limited": [Reply(error=429, body=OPENAI_RATE, headers={"Retry-After": "1"})],
        "out-of-quota": [Reply(error=429, body=OPENAI_QUOTA)],
        "anthropic-credit": [Reply(error=400, body=ANTHROPIC_CREDIT)],
        "overloaded": [Reply(error=503)],
        "hanging": [Reply("too late", hang_s=30)],
    }
    tasks(tmp_path / "tasks", [*starving, "solved", "spendthrift"])
    store = tmp_path / "h.db"
    with FakeModel([Reply("the answer is 42")], openai_key=UPSTREAM_KEY, anthropic_key=UPSTREAM_KEY) as fake:
        fake.by_marker = {f"Do {name}.": script for name, script in starving.items()}
        fake.by_marker["Do spendthrift."] = [Reply("still thinking about it"), Reply("the answer is 42")]
        spec = experiment(
            tmp_path,
            fake,
            concurrency=2,
            retry={"max_retries": 1},
            gateway={"retry_backoff_s": 0.2, "breaker": None, "limits": {"tokens": 5}},
        )
        res = headroom("sweep", "--experiment", str(spec), "--store", str(store), "--format", "none", "--no-canary")
    assert res.returncode == 0, res.stderr
    got = tries(store)
    for name in starving:
        first, second = got[name]
        assert [(t["outcome"], t["reason"], t["final"]) for t in got[name]] == [
            ("infra_error", "model_unavailable", 0),
            ("infra_error", "model_unavailable", 1),
        ], name
        usage = first["evidence"]["model_usage"]
        assert usage["starved"]["rule"] == "final_call" and usage["calls"] == 1, name
        assert sum(usage["failures"].values()) == 1 and set(usage["failures"]) <= {
            "rate_limit",
            "quota",
            "server",
            "timeout",
        }
    kinds = {n: next(iter(got[n][0]["evidence"]["model_usage"]["failures"])) for n in starving}
    assert kinds == {
        "rate-limited": "rate_limit",
        "out-of-quota": "quota",
        "anthropic-credit": "quota",
        "overloaded": "server",
        "hanging": "timeout",
    }
    # the retry of the rate-limited try waited at least the provider's Retry-After
    first, second = got["rate-limited"]
    assert first["evidence"]["model_usage"]["starved"]["retry_after_s"] == 1.0
    waited = datetime.fromisoformat(second["started_at"]) - datetime.fromisoformat(first["finished_at"])
    assert waited.total_seconds() >= 1.0
    # a try that solved its task passes, its usage measured; one that spent its token limit is failed(token_limit)
    (solved,) = got["solved"]
    assert (solved["outcome"], solved["reason"]) == ("passed", None) and solved["tokens_in"] > 0
    (spent,) = got["spendthrift"]
    assert (spent["outcome"], spent["reason"]) == ("failed", "token_limit")
    usage = spent["evidence"]["model_usage"]
    assert usage["limit_hit"] == "tokens" and usage["failures"] == {"limit": 1} and usage["calls"] == 2
    assert usage["working_time_s"] is not None


def test_a_failing_provider_pauses_the_sweep_and_resume_finishes_it(tmp_path: Path) -> None:
    tasks(tmp_path / "tasks", ["a", "b", "c", "d"])
    store = tmp_path / "h.db"
    with FakeModel([Reply(error=500)], openai_key=UPSTREAM_KEY, anthropic_key=UPSTREAM_KEY) as fake:
        spec = experiment(tmp_path, fake, concurrency=1, gateway={"breaker": {"calls": 2, "failed_fraction": 1.0}})
        res = headroom("sweep", "--experiment", str(spec), "--store", str(store), "--format", "none", "--no-canary")
        assert res.returncode == 130, res.stderr
        assert "paused: the model provider is failing: 2 of the run's last 2 model calls failed" in res.stderr
        assert "headroom resume" in res.stderr
        before = tries(store)
        db = sqlite3.connect(store)
        status, prov = db.execute("SELECT r.status, p.json FROM runs r JOIN provenance p USING (run_id)").fetchone()
        db.close()
        assert status == "interrupted" and "server 2" in json.loads(prov)["paused"][0]["why"]
        # the two tries the provider failed are on record as starved; the rest never started
        assert sorted(t["reason"] for ts in before.values() for t in ts) == ["model_unavailable"] * 2
        fake.script = [Reply("the answer is 42")]  # the provider is back
        res = headroom("resume", "--store", str(store), "--format", "markdown", "--no-canary")
        assert res.returncode == 0, res.stderr
    assert "Paused at " in res.stdout and "(2 of the run's last 2 model calls failed" in res.stdout  # the report
    after = tries(store)
    assert sorted(t["outcome"] for ts in after.values() for t in ts) == ["infra_error"] * 2 + ["passed"] * 2


def test_calls_the_store_will_not_take_are_counted_and_the_report_says_the_usage_is_incomplete(
    tmp_path: Path,
) -> None:
    from orchestrator.store.sqlite import Store

    tasks(tmp_path / "tasks", ["solved"])
    store = tmp_path / "h.db"
    Store(store).close()
    db = sqlite3.connect(store)  # a real SQLite refusal, as a full disk or a corrupt page would give
    db.execute("CREATE TRIGGER refuse BEFORE INSERT ON model_calls BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")
    db.commit()
    db.close()
    with FakeModel([Reply("the answer is 42")], openai_key=UPSTREAM_KEY, anthropic_key=UPSTREAM_KEY) as fake:
        spec = experiment(tmp_path, fake)
        res = headroom("sweep", "--experiment", str(spec), "--store", str(store), "--format", "markdown", "--no-canary")
    assert res.returncode == 0, res.stderr
    ((row,),) = tries(store).values()
    assert row["outcome"] == "passed" and row["tokens_in"] > 0 and row["cost_usd"] > 0  # counted from memory
    assert row["evidence"]["model_usage"]["unrecorded_calls"] == 1
    assert "Model usage incomplete in 1 trial (1x-strict 1)" in res.stdout, res.stdout[-3000:]


def test_a_try_past_its_working_time_is_refused_further_calls_and_failed_with_that_reason(tmp_path: Path) -> None:
    tasks(tmp_path / "tasks", ["slowpoke"])
    store = tmp_path / "h.db"
    script = [Reply("wait a moment"), Reply("the answer is 42")]
    with FakeModel(script, openai_key=UPSTREAM_KEY, anthropic_key=UPSTREAM_KEY) as fake:
        spec = experiment(tmp_path, fake, gateway={"limits": {"working_time_s": 2}})
        res = headroom("sweep", "--experiment", str(spec), "--store", str(store), "--format", "none", "--no-canary")
        assert res.returncode == 0, res.stderr
        assert len(fake.seen) == 1  # the second call was never forwarded
    ((row,),) = tries(store).values()
    assert (row["outcome"], row["reason"]) == ("failed", "working_time_limit")
    usage = row["evidence"]["model_usage"]
    assert usage["limit_hit"] == "working_time" and usage["failures"] == {"limit": 1}
    assert usage["working_time_s"] >= 2 and usage["backoff_s"] == 0
