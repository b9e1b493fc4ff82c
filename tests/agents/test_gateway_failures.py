"""The gateway against a fake provider on loopback (tests/agents/fake_model.py; a model provider cannot run here)
that fails the way real ones do: each failure is classified, a try starved by them is told from one that was
not, usage the agent tries to hide or walk away from is counted, per-try limits are enforced, rows the store
will not take are counted and marked, and the run's circuit breaker trips."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from orchestrator.agents.gateway import Gateway, failures
from orchestrator.agents.gateway.ledger import Ledgers, Note, TryLedger
from orchestrator.artifacts.sink import TryKey
from orchestrator.spec.gateway import Breaker, GatewaySpec, TrialLimits
from orchestrator.store.sqlite import Store
from tests.agents.fake_model import FakeModel, Reply
from tests.agents.test_gateway import ENV, chat, messages, spec_for

A, B = TryKey("run", "trial-a", 0), TryKey("run", "trial-b", 0)

OPENAI_RATE = {
    "error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}
}
OPENAI_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "code": "insufficient_quota",
    }
}
ANTHROPIC_CREDIT = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing.",
    },
}
ANTHROPIC_SPEND = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "You have reached your specified API usage limits."},
}
ANTHROPIC_RATE = {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"}}
ANTHROPIC_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
# A request error whose message quotes what the agent sent: the agent cannot word it into a quota error.
QUOTED = {
    "error": {
        "message": "The model `You exceeded your current quota` does not exist",
        "type": "invalid_request_error",
        "code": "model_not_found",
    }
}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "h.db"
    Store(path).close()
    return path


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    from tests.agents.test_gateway import ANTHROPIC_KEY, OPENAI_KEY

    with FakeModel([Reply("done: the answer is 42")], openai_key=OPENAI_KEY, anthropic_key=ANTHROPIC_KEY) as f:
        yield f


def rows(store_path: Path) -> list[dict[str, object]]:
    db = sqlite3.connect(store_path)
    db.row_factory = sqlite3.Row
    return [dict(r) for r in db.execute("SELECT * FROM model_calls ORDER BY trial_id, seq")]


@pytest.mark.parametrize(
    "api, reply, status, kind, after",
    [
        ("openai", Reply(error=429, body=OPENAI_RATE, headers={"Retry-After": "7"}), 429, "rate_limit", 7.0),
        ("openai", Reply(error=429, body=OPENAI_QUOTA), 429, "quota", None),
        ("openai", Reply(error=429, body=OPENAI_RATE, headers={"retry-after-ms": "1500"}), 429, "rate_limit", 1.5),
        ("openai", Reply(error=429, body=OPENAI_RATE, headers={"retry-after-ms": "NaN"}), 429, "rate_limit", None),
        ("openai", Reply(error=500), 500, "server", None),
        ("openai", Reply(error=400, body=QUOTED), 400, "request", None),
        ("anthropic", Reply(error=429, body=ANTHROPIC_RATE, headers={"retry-after": "3"}), 429, "rate_limit", 3.0),
        ("anthropic", Reply(error=400, body=ANTHROPIC_CREDIT), 400, "quota", None),
        ("anthropic", Reply(error=400, body=ANTHROPIC_SPEND), 400, "quota", None),
        ("anthropic", Reply(error=529, body=ANTHROPIC_OVERLOADED), 529, "server", None),
    ],
)
def test_each_upstream_failure_is_classified_from_the_providers_own_answer(
    fake: FakeModel, store_path: Path, api: str, reply: Reply, status: int, kind: str, after: float | None
) -> None:
    fake.script = [reply]
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        resp = chat(env) if api == "openai" else messages(env)
        end = gw.end_try(A)
        line = json.loads(end.transcript.read_text()) if end.transcript else {}
    assert resp.status_code == status  # the agent gets the provider's answer as it was
    assert {k: v for k, v in resp.headers.items() if k.startswith("retry-after")} == {
        k.lower(): v for k, v in reply.headers.items()
    }  # the provider's wait reaches the agent as it was given
    (row,) = rows(store_path)
    assert failures.of_error(str(row["error"])) == kind
    assert end.usage.failures == {kind: 1}
    assert line["failure"] == kind and line["retry_after_s"] == after
    # the final call failed on the provider's side: starved; a request the provider refused is the agent's
    assert (end.usage.starved is not None) == (kind in failures.UPSTREAM)
    if end.usage.starved is not None:
        assert end.usage.starved.rule == "final_call" and end.usage.starved.final_call == f"{status} {kind}"
        assert end.usage.starved.retry_after_s == after


def test_an_error_event_inside_an_anthropic_stream_is_the_providers_failure(fake: FakeModel, store_path: Path) -> None:
    fake.script = [Reply("never finished", stream_error=ANTHROPIC_OVERLOADED)]
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        resp = messages(env, stream=True)
        end = gw.end_try(A)
    assert resp.status_code == 200 and '"overloaded_error"' in resp.text  # relayed as it came
    assert end.usage.failures == {"server": 1} and end.usage.starved is not None
    # its input was counted from message_start, its final count never came: the usage may be low, and says so
    assert end.usage.tokens_in > 0 and end.usage.usage_missing == 1 and end.usage.incomplete
    (row,) = rows(store_path)
    assert failures.of_error(str(row["error"])) == "server"


def test_a_hanging_provider_is_a_timeout_and_a_wrong_upstream_key_is_auth(fake: FakeModel, store_path: Path) -> None:
    fake.script = [Reply("late", hang_s=30)]
    with Gateway(spec_for(fake.url, timeout_s=0.5), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        hung = chat(env)
        fake.script = [Reply("ok")]
        fake.openai_key = "the-provider-now-wants-another-key"
        refused = chat(env)
        end = gw.end_try(A)
    assert hung.status_code == 504 and refused.status_code == 401
    assert end.usage.failures == {"auth": 1, "timeout": 1}
    assert [failures.of_error(str(r["error"])) for r in rows(store_path)] == ["timeout", "auth"]


def test_an_unreachable_provider_is_a_connection_failure(store_path: Path) -> None:
    with Gateway(spec_for("http://127.0.0.1:9"), store_path, environ=ENV) as gw:  # nothing listens on port 9
        env = gw.env_for(A)
        assert chat(env).status_code == 502
        end = gw.end_try(A)
    assert end.usage.failures == {"connection": 1} and end.usage.starved is not None


def test_a_try_that_recovered_is_not_starved_and_one_that_mostly_failed_is(fake: FakeModel, store_path: Path) -> None:
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env_a, env_b = gw.env_for(A), gw.env_for(B)
        fake.script = [Reply(error=429, body=OPENAI_RATE)]
        chat(env_a)
        chat(env_b)
        chat(env_b)
        fake.script = [Reply("ok")]
        chat(env_a)  # A's provider came back: its last call worked, and half its calls failed (not most)
        chat(env_b)  # B's last call worked, but two of its three calls in its last minute failed
        a, b = gw.end_try(A), gw.end_try(B)
    assert a.usage.starved is None and a.usage.failures == {"rate_limit": 1}
    assert b.usage.starved is not None and b.usage.starved.rule == "last_minute"
    assert (b.usage.starved.window_calls, b.usage.starved.window_failed) == (3, 2)


def test_a_stream_always_carries_its_usage_whatever_the_agent_asks(fake: FakeModel, store_path: Path) -> None:
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        hidden = chat(env, stream=True, stream_options={"include_usage": False})
        asked = chat(env, stream=True, stream_options={"include_usage": True})
        odd = chat(env, stream=True, stream_options="none")
        # a key given twice: the upstream gets the request as the gateway read it (one "stream", one option)
        twice = httpx.post(
            f"{env['OPENAI_BASE_URL']}/chat/completions",
            headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}", "Content-Type": "application/json"},
            content=b'{"model": "fake-model-1", "messages": [{"role": "user", "content": "solve the task"}], '
            b'"stream_options": {"include_usage": false}, "stream": false, "stream": true}',
            timeout=30,
        )
        gw.end_try(A)
    assert twice.status_code == 200 and fake.seen[-1].raw.count(b'"stream":') == 1
    assert fake.seen[-1].body["stream"] is True and fake.seen[-1].body["stream_options"]["include_usage"] is True
    assert all(s.body["stream_options"]["include_usage"] is True for s in fake.seen)
    got = [[json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: {")] for r in (hidden, asked, odd)]
    assert not any("usage" in c for c in got[0] + got[2])  # what it asked for: no usage chunk
    assert got[1][-1]["usage"]["completion_tokens"] > 0  # asked for it: gets it
    recorded = rows(store_path)
    assert len(recorded) == 4 and all(r["tokens_in"] and r["tokens_out"] for r in recorded)
    assert len({(r["tokens_in"], r["tokens_out"]) for r in recorded}) == 1


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_agent_that_leaves_a_stream_early_is_still_billed_in_full(
    fake: FakeModel, store_path: Path, api: str
) -> None:
    fake.script = [Reply("a long answer " * 40, pause_s=1.0)]
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        full = (chat(env) if api == "openai" else messages(env)).json()["usage"]
        if api == "openai":
            url, headers = (
                f"{env['OPENAI_BASE_URL']}/chat/completions",
                {"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
            )
            body = {
                "model": "fake-model-1",
                "messages": [{"role": "user", "content": "solve the task"}],
                "stream": True,
            }
        else:
            url = f"{env['ANTHROPIC_BASE_URL']}/v1/messages"
            headers = {"x-api-key": env["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01"}
            body = {"model": "fake-model-1", "max_tokens": 100, "stream": True}
            body["messages"] = [{"role": "user", "content": "solve the task"}]
        with httpx.Client(timeout=30) as client, client.stream("POST", url, headers=headers, json=body) as resp:
            next(resp.iter_lines())  # the first event, then it hangs up: the usage comes last
        end = gw.end_try(A)
    first, left = rows(store_path)
    out = full["completion_tokens"] if api == "openai" else full["output_tokens"]
    assert left["tokens_out"] == first["tokens_out"] == out and left["tokens_in"] == first["tokens_in"]
    assert end.usage.tokens_out == 2 * out and end.usage.usage_missing == 0 and not end.usage.incomplete


def test_the_token_limit_refuses_the_next_call_and_is_recorded(fake: FakeModel, store_path: Path) -> None:
    with Gateway(spec_for(fake.url, limits={"tokens": 5}), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        assert chat(env).status_code == 200  # more than 5 tokens: the limit is spent after this call
        refused = chat(env)
        end = gw.end_try(A)
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "limit_exceeded"
    assert len(fake.seen) == 1  # never forwarded
    assert end.usage.limit_hit == "tokens" and end.usage.failures == {"limit": 1} and end.usage.starved is None


def test_a_cost_limit_refuses_a_model_it_cannot_price(fake: FakeModel, store_path: Path) -> None:
    with Gateway(spec_for(fake.url, limits={"cost_usd": 1.0}), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        assert chat(env).status_code == 200  # fake-model-1 has a price
        resp = httpx.post(
            f"{env['OPENAI_BASE_URL']}/chat/completions",
            headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
            json={"model": "no-such-price", "messages": [{"role": "user", "content": "x"}]},
            timeout=30,
        )
        end = gw.end_try(A)
    assert resp.status_code == 403 and "no price" in resp.json()["error"]["message"]
    assert end.usage.failures == {"limit": 1} and len(fake.seen) == 1


def test_working_time_leaves_out_the_wait_on_the_provider(fake: FakeModel, store_path: Path) -> None:
    with Gateway(spec_for(fake.url, limits={"working_time_s": 1.0}), store_path, environ=ENV) as gw:
        env_a, env_b = gw.env_for(A), gw.env_for(B)
        time.sleep(1.5)  # before a try's first call: not its working time
        assert chat(env_b).status_code == 200
        fake.script = [Reply(error=429, body=OPENAI_RATE, headers={"Retry-After": "30"})]
        assert chat(env_a).status_code == 429
        fake.script = [Reply("ok")]
        time.sleep(1.5)  # A waits out its rate limit; B works without its model
        assert chat(env_a).status_code == 200
        assert chat(env_b).status_code == 403
        a, b = gw.end_try(A), gw.end_try(B)
    assert a.usage.limit_hit is None and a.usage.backoff_s >= 1.5 and a.usage.working_time_s is not None
    assert b.usage.limit_hit == "working_time" and b.usage.backoff_s == 0


def test_backoff_counts_each_wait_once_and_no_longer_than_the_provider_asked() -> None:
    ledger = TryLedger(started=0.0)
    ledger.notes = [
        Note(10.0, 11.0, 429, "rate_limit", retry_after=5.0),  # waits 11..16 (5 s asked), next call at 20
        Note(10.5, 12.0, 503, "server"),  # concurrent with the first: 10.5..20 overlaps, counted once
        Note(20.0, 21.0, 200, None),
        Note(30.0, 31.0, 400, "request"),  # the agent's own: no wait of the provider's
    ]
    # the 429 waits 10..16, the 503 10.5..20 (the try's next call): together 10..20
    assert ledger.backoff(now=100.0) == pytest.approx(10.0)
    assert ledger.working_time(now=100.0) == (pytest.approx(90.0), pytest.approx(10.0))


def test_the_breaker_trips_on_the_runs_recent_provider_failures_only() -> None:
    led = Ledgers(TrialLimits(), Breaker(calls=4, failed_fraction=0.75))
    for failure in ("rate_limit", None, "request", "limit", "server"):  # request and limit are not the provider's
        led.add(A, Note(0, 0, 0, failure))
    assert led.tripped is None  # 3 calls of the provider's so far
    led.add(B, Note(0, 0, 0, "quota"))
    assert led.tripped is not None and "3 of the run's last 4" in led.tripped and "quota 1" in led.tripped
    off = Ledgers(TrialLimits(), None)
    for _ in range(50):
        off.add(A, Note(0, 0, 0, "server"))
    assert off.tripped is None


def test_rows_the_store_will_not_take_are_retried_then_counted_and_marked(fake: FakeModel, store_path: Path) -> None:
    db = sqlite3.connect(store_path)
    db.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON model_calls WHEN NEW.trial_id = 'trial-a' "
        "BEGIN SELECT RAISE(ABORT, 'the store is full'); END"
    )
    db.commit()
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env_a, env_b = gw.env_for(A), gw.env_for(B)
        usage = chat(env_a).json()["usage"]
        chat(env_a)
        chat(env_b)
        a, b = gw.end_try(A), gw.end_try(B)
        kept = a.transcript.read_text().splitlines() if a.transcript else []
    assert [r["trial_id"] for r in rows(store_path)] == ["trial-b"]  # A's rows are lost ...
    # ... but its calls still count, and its usage says it is incomplete
    assert a.usage.calls == 2 and a.usage.tokens_in == 2 * usage["prompt_tokens"] and a.usage.cost_usd
    assert a.usage.unrecorded_calls == 2 and a.usage.incomplete
    assert b.usage.unrecorded_calls == 0 and not b.usage.incomplete
    assert len(kept) == 2  # the bodies are kept


def test_a_row_the_store_refuses_for_a_while_is_written_on_a_later_try(fake: FakeModel, store_path: Path) -> None:
    db = sqlite3.connect(store_path)
    db.executescript(
        "CREATE TABLE fails (n INTEGER); INSERT INTO fails VALUES (2);"
        # FAIL keeps the statement's earlier changes: the count goes down though the insert is refused
        "CREATE TRIGGER refuse BEFORE INSERT ON model_calls WHEN (SELECT n FROM fails) > 0 "
        "BEGIN UPDATE fails SET n = n - 1; SELECT RAISE(FAIL, 'database is locked'); END;"
    )
    db.close()
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        chat(env)
        end = gw.end_try(A)
    assert len(rows(store_path)) == 1 and end.usage.unrecorded_calls == 0 and not end.usage.incomplete


def test_a_model_name_no_store_can_hold_costs_no_row(fake: FakeModel, store_path: Path) -> None:
    fake.script = [Reply(error=400, body=QUOTED)]  # no model in the answer: the row names the requested one
    with Gateway(spec_for(fake.url), store_path, environ=ENV) as gw:
        env = gw.env_for(A)
        resp = httpx.post(
            f"{env['OPENAI_BASE_URL']}/chat/completions",
            headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}", "Content-Type": "application/json"},
            content=b'{"model": "\\ud800-lone", "messages": [{"role": "user", "content": "x"}]}',
            timeout=30,
        )
        end = gw.end_try(A)
    assert resp.status_code == 400 and end.usage.unrecorded_calls == 0
    (row,) = rows(store_path)
    assert str(row["model"]).endswith("-lone")


def test_classes_are_read_from_the_status_and_the_providers_error_type() -> None:
    assert failures.classify(200) is None
    assert failures.classify(402) == "quota"
    assert failures.classify(403, {"error": {"type": "permission_error", "message": "no"}}) == "auth"
    assert failures.classify(200, {"type": "error", "error": {"type": "overloaded_error"}}) == "server"
    assert failures.classify(200, {"type": "error", "error": {"type": "rate_limit_error"}}) == "rate_limit"
    assert failures.classify(404, {"error": {"message": "billing is due", "type": "not_found"}}) == "request"
    # a spend cap of a proxy in between (a budget), and a 402 from a credits-based provider
    budget = {"error": {"message": "Budget has been exceeded! Current cost: 10.2", "type": "budget_exceeded"}}
    assert failures.classify(400, budget) == "quota" and failures.classify(402, {"error": "no credits"}) == "quota"
    assert failures.classify(400, {"error": {"message": "thinking.budget_tokens: must be >= 1024"}}) == "request"
    assert failures.retry_after("Wed, 21 Oct 2099 07:28:00 GMT") == 86_400.0
    assert failures.retry_after("soon") is None and failures.retry_after("-3") == 0.0
    assert failures.retry_after("nan") is None and failures.retry_after("inf") == 86_400.0


def test_limits_and_breaker_are_checked_as_the_experiment_is_read() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        GatewaySpec.model_validate({"openai": {"base_url": "http://x/v1"}, "limits": {"tokens": 0}})
    with pytest.raises(ValueError, match="Extra inputs"):
        GatewaySpec.model_validate({"openai": {"base_url": "http://x/v1"}, "limits": {"token": 5}})
    spec = GatewaySpec.model_validate({"openai": {"base_url": "http://x/v1"}, "breaker": None})
    assert spec.breaker is None and spec.limits.tokens is None


def test_a_row_never_holds_the_trys_key_or_the_runs_secrets(fake: FakeModel, store_path: Path) -> None:
    fake.script = [Reply(error=400, body=QUOTED)]  # no model in the answer: the row names the requested one
    secret = "agent-env-secret-value-0123456789"
    with Gateway(spec_for(fake.url), store_path, environ=ENV, secrets=[secret]) as gw:
        env = gw.env_for(A)
        for model in (f"m-{env['OPENAI_API_KEY']}", f"m-{secret}"):
            httpx.post(
                f"{env['OPENAI_BASE_URL']}/chat/completions",
                headers={"Authorization": f"Bearer {env['OPENAI_API_KEY']}"},
                json={"model": model, "messages": [{"role": "user", "content": "x"}]},
                timeout=30,
            )
        end = gw.end_try(A)
    assert [r["model"] for r in rows(store_path)] == ["m-[REDACTED]", "m-[REDACTED]"]
    assert end.usage.models == ["m-[REDACTED]"]
    for f in store_path.parent.glob("h.db*"):
        assert env["OPENAI_API_KEY"].encode() not in f.read_bytes() and secret.encode() not in f.read_bytes()
