"""The model gateway against a scripted fake upstream on loopback: usage and cost per try, per-try keys,
streaming, upstream errors, and the upstream key kept from the trial, the store and the logs."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from orchestrator.agents.gateway import Gateway, check
from orchestrator.artifacts.sink import TryKey
from orchestrator.errors import SpecError
from orchestrator.spec.gateway import GatewaySpec
from orchestrator.store.sqlite import Store
from tests.agents.fake_model import FakeModel, Reply

OPENAI_KEY = "sk-upstream-openai-0123456789abcdefXYZ"
ANTHROPIC_KEY = "sk-ant-upstream-9876543210fedcbaQRS"
ENV = {"UP_OPENAI": OPENAI_KEY, "UP_ANTHROPIC": ANTHROPIC_KEY}
A, B = TryKey("run", "trial-a", 0), TryKey("run", "trial-b", 0)
PRICES = {"fake-model-*": {"input": 2.0, "output": 10.0, "cached_input": 0.5}}


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    script = [
        Reply("let me look", tool_calls=[{"name": "bash", "arguments": {"cmd": "ls /app"}}], cached=8),
        Reply("done: the answer is 42"),
    ]
    with FakeModel(script, openai_key=OPENAI_KEY, anthropic_key=ANTHROPIC_KEY) as f:
        yield f


def spec_for(url: str, **extra: object) -> GatewaySpec:
    return GatewaySpec.model_validate(
        {
            "openai": {"base_url": f"{url}/v1", "api_key_env": "UP_OPENAI"},
            "anthropic": {"base_url": url, "api_key_env": "UP_ANTHROPIC"},
            "prices": PRICES,
            **extra,
        }
    )


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "h.db"
    Store(path).close()
    return path


@pytest.fixture
def gateway(fake: FakeModel, store_path: Path) -> Iterator[Gateway]:
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        yield gw


def chat(env: dict[str, str], **body: object) -> httpx.Response:
    return httpx.post(
        f"{env['OPENAI_BASE_URL']}/chat/completions",
        headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
        json={"model": "fake-model-1", "messages": [{"role": "user", "content": "solve the task"}], **body},
        timeout=30,
    )


def messages(env: dict[str, str], **body: object) -> httpx.Response:
    return httpx.post(
        f"{env['ANTHROPIC_BASE_URL']}/v1/messages",
        headers={"x-api-key": env["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01"},
        json={
            "model": "fake-model-1",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "solve the task"}],
            **body,
        },
        timeout=30,
    )


def sse_data(resp: httpx.Response) -> list[object]:
    return [
        json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"
    ]


def calls(store_path: Path) -> list[dict[str, object]]:
    db = sqlite3.connect(store_path)
    db.row_factory = sqlite3.Row
    return [dict(r) for r in db.execute("SELECT * FROM model_calls ORDER BY trial_id, seq")]


def test_env_points_the_sdks_at_the_gateway_with_a_per_try_key(gateway: Gateway) -> None:
    env = gateway.env_for(A)
    assert env["OPENAI_BASE_URL"] == f"{gateway.base_url}/v1" and env["ANTHROPIC_BASE_URL"] == gateway.base_url
    assert env["HEADROOM_MODEL_BASE_URL"] == gateway.base_url.rstrip("/")
    assert env["OPENAI_API_KEY"] == env["ANTHROPIC_API_KEY"] == env["HEADROOM_MODEL_API_KEY"]
    assert gateway.env_for(A) == env  # the same try keeps its key
    assert gateway.env_for(B)["OPENAI_API_KEY"] != env["OPENAI_API_KEY"]
    assert OPENAI_KEY not in json.dumps(env) and ANTHROPIC_KEY not in json.dumps(env)
    assert gateway.base_url.startswith("http://127.0.0.1:")


def test_plain_and_streamed_calls_are_measured_from_the_upstreams_usage(
    gateway: Gateway, fake: FakeModel, store_path: Path
) -> None:
    env = gateway.env_for(A)
    plain = chat(env)
    assert (
        plain.status_code == 200
        and plain.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    )
    streamed = chat(env, stream=True)  # no stream_options: the gateway asks for the usage chunk
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert fake.seen[-1].body["stream_options"] == {"include_usage": True}
    # ... and keeps it from an agent that did not ask for it (the stream it gets is the one it asked for)
    assert all("usage" not in c for c in sse_data(streamed)) and sse_data(streamed)[-1]["choices"]
    anth = messages(env, stream=True)
    assert [e["type"] for e in sse_data(anth)][0] == "message_start"
    resp = httpx.post(
        f"{env['OPENAI_BASE_URL']}/responses",
        headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
        json={"model": "fake-model-1", "input": "solve the task", "stream": True},
        timeout=30,
    )
    assert resp.status_code == 200

    end = gateway.end_try(A)
    rows = calls(store_path)
    assert [(r["api"], r["streamed"], r["status"]) for r in rows] == [
        ("openai-chat", 0, 200),
        ("openai-chat", 1, 200),
        ("anthropic-messages", 1, 200),
        ("openai-responses", 1, 200),
    ]
    usage = plain.json()["usage"]
    assert rows[0]["tokens_in"] == rows[1]["tokens_in"] == usage["prompt_tokens"]
    assert rows[0]["tokens_out"] == rows[1]["tokens_out"] == usage["completion_tokens"]
    # Anthropic leaves cache reads out of input_tokens; the gateway counts every input token.
    assert rows[2]["tokens_in"] == usage["prompt_tokens"] and rows[2]["cached_tokens"] == 8  # same messages
    assert rows[3]["tokens_in"] > 0 and rows[3]["tokens_out"] > 0  # response.completed's usage
    expected_cost = ((usage["prompt_tokens"] - 8) * 2.0 + 8 * 0.5 + usage["completion_tokens"] * 10.0) / 1e6
    assert rows[0]["cost_usd"] == pytest.approx(expected_cost)
    assert end.usage.calls == 4 and end.usage.tokens_in == sum(r["tokens_in"] for r in rows)
    assert end.usage.cost_usd == pytest.approx(sum(r["cost_usd"] for r in rows))
    assert end.usage.models == ["fake-model-1"] and end.usage.statuses == {"200": 4}
    assert end.transcript is not None and len(end.transcript.read_text().splitlines()) == 4


def test_the_anthropic_count_adds_cache_reads_back(gateway: Gateway, store_path: Path) -> None:
    env = gateway.env_for(A)
    body = messages(env).json()
    gateway.end_try(A)
    (row,) = calls(store_path)
    u = body["usage"]
    assert row["tokens_in"] == u["input_tokens"] + u["cache_read_input_tokens"] and row["cached_tokens"] == 8
    assert row["tokens_out"] == u["output_tokens"]


def test_a_key_is_refused_after_its_try_and_never_counts_for_another(gateway: Gateway, store_path: Path) -> None:
    env_a, env_b = gateway.env_for(A), gateway.env_for(B)
    assert chat(env_a).status_code == 200
    gateway.end_try(A)
    late = chat(env_a)
    assert late.status_code == 401 and "ended" in late.json()["error"]["message"]
    assert chat({**env_a, "OPENAI_API_KEY": "hr-try-made-up"}).status_code == 401
    assert chat({**env_a, "OPENAI_API_KEY": OPENAI_KEY}).status_code == 401  # the upstream key is not a try's key
    assert chat(env_b).status_code == 200
    end_b = gateway.end_try(B)
    assert end_b.usage.calls == 1 and end_b.usage.rejected_after_end == 0
    by_trial = {(r["trial_id"], r["status"]) for r in calls(store_path)}
    assert by_trial == {("trial-a", 200), ("trial-a", 401), ("trial-b", 200)}


def test_upstream_errors_are_the_calls_status(fake: FakeModel, store_path: Path) -> None:
    fake.script = [Reply(error=529)]
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        assert chat(env).status_code == 529 and messages(env, stream=True).status_code == 529
        end = gw.end_try(A)
    assert end.usage.statuses == {"529": 2} and end.usage.tokens_in == 0 and end.usage.cost_usd == 0
    assert all(r["error"] for r in calls(store_path))


def test_an_unreachable_upstream_is_a_502_on_record(store_path: Path) -> None:
    with Gateway(spec_for("http://127.0.0.1:9"), store_path, environ=ENV) as gw:  # nothing listens on port 9
        env = gw.env_for(A)
        resp = chat(env)
        end = gw.end_try(A)
    assert resp.status_code == 502 and end.usage.statuses == {"502": 1}
    assert "unreachable" in calls(store_path)[0]["error"]


def test_a_model_without_a_price_has_tokens_and_no_cost(fake: FakeModel, store_path: Path) -> None:
    with Gateway(spec_for(fake.url, prices={}), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        chat(env)
        end = gw.end_try(A)
    assert end.usage.tokens_in > 0 and end.usage.cost_usd is None and end.usage.unpriced_models == ["fake-model-1"]


def test_the_upstream_key_never_leaks(
    fake: FakeModel, store_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        chat(env, stream=True)
        messages(env)
        # The agent's own credentials go nowhere: the upstream got the upstream's key, and only that.
        assert fake.seen[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
        assert fake.seen[1].headers["x-api-key"] == ANTHROPIC_KEY and "authorization" not in fake.seen[1].headers
        assert all(env["OPENAI_API_KEY"] not in json.dumps(s.headers) for s in fake.seen)
        # A provider that echoes the key it got: the agent sees it redacted.
        fake.openai_key = "something-else"
        echoed = chat(env)
        assert echoed.status_code == 401 and OPENAI_KEY not in echoed.text and "[REDACTED]" in echoed.text
        responses = [chat(env), messages(env)]
        end = gw.end_try(A)
        transcript = end.transcript.read_bytes() if end.transcript else b""
    for r in responses:
        assert OPENAI_KEY not in r.text + json.dumps(dict(r.headers)) and ANTHROPIC_KEY not in r.text
    logs = caplog.text + "".join(capfd.readouterr())
    for key in (OPENAI_KEY, ANTHROPIC_KEY):
        assert key not in logs and key.encode() not in transcript
        for f in store_path.parent.glob("h.db*"):
            assert key.encode() not in f.read_bytes(), f


def test_refused_before_the_sweep_when_the_key_is_missing_or_handed_to_the_agent(fake: FakeModel) -> None:
    spec = spec_for(fake.url)
    with pytest.raises(SpecError, match="UP_ANTHROPIC is not set"):
        check(spec, [], {"UP_OPENAI": OPENAI_KEY})
    with pytest.raises(SpecError, match="also handed to the agent"):
        check(spec, ["UP_OPENAI"], ENV)
    check(spec, ["OTHER"], ENV)
