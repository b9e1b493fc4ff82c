"""The model gateway's cost per call: the same calls straight to a fake provider on loopback, and through the gateway.

    python benchmarks/bench_gateway.py [--calls 200] [--words 400]

The provider is the tests' scripted fake (tests/agents/fake_model.py; a real one cannot run here), answering
with a reply of ``--words`` words: plain, and streamed as one server-sent event per word. The gateway reads
each stream in a task of its own (so an agent that hangs up early is still billed in full), classifies every
call and keeps each try's ledger; this measures what that costs. Printed: the median time per call, direct
and through the gateway, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from orchestrator.agents.gateway import Gateway
from orchestrator.artifacts.sink import TryKey
from orchestrator.spec.gateway import GatewaySpec
from orchestrator.store.sqlite import Store

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the fake provider lives with the tests it is written for
from tests.agents.fake_model import FakeModel, Reply  # noqa: E402

KEY = "sk-bench-upstream-0123456789"


def timed(client: httpx.Client, url: str, key: str, stream: bool, calls: int) -> list[float]:
    body = {"model": "fake-model-1", "messages": [{"role": "user", "content": "go"}], "stream": stream}
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        resp = client.post(f"{url}/chat/completions", headers={"Authorization": f"Bearer {key}"}, json=body)
        resp.raise_for_status()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--words", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeModel([Reply("word " * args.words)], openai_key=KEY) as fake:
        store = Path(tmp) / "h.db"
        Store(store).close()
        spec = GatewaySpec.model_validate({"openai": {"base_url": f"{fake.url}/v1", "api_key_env": "UP"}})
        with Gateway(spec, store, environ={"UP": KEY}) as gw, httpx.Client(timeout=60) as client:
            env = gw.env_for(TryKey("bench", "t", 0))
            print(f"{args.calls} calls per row, a reply of {args.words} words (one event per word when streamed)")
            print(f"{'':10} {'direct ms':>10} {'gateway ms':>11} {'ratio':>6}")
            for stream in (False, True):
                direct = timed(client, f"{fake.url}/v1", KEY, stream, args.calls)
                through = timed(client, env["OPENAI_BASE_URL"], env["OPENAI_API_KEY"], stream, args.calls)
                d, g = statistics.median(direct) * 1e3, statistics.median(through) * 1e3
                print(f"{'streamed' if stream else 'plain':10} {d:10.2f} {g:11.2f} {g / d:6.2f}")
            gw.end_try(TryKey("bench", "t", 0))


if __name__ == "__main__":
    main()
