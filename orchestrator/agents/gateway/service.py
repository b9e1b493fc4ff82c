"""The gateway's lifecycle: started once per sweep (before the first try), one key per try, stopped at the end.

It serves on 127.0.0.1 only, on a port of its own choosing, in a thread of the
headroom process; the upstream keys are read from the host variables the experiment
names, when it starts, and stay in this process.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from orchestrator.agents.gateway.app import State, create_app
from orchestrator.agents.gateway.keys import TryKeys
from orchestrator.agents.gateway.ledger import Ledgers
from orchestrator.agents.gateway.recorder import CallLog
from orchestrator.artifacts.sink import TryKey
from orchestrator.errors import SpecError
from orchestrator.spec.facts import ModelUsage
from orchestrator.spec.gateway import GatewaySpec

HOST = "127.0.0.1"
#: The variables a try gets (docs/agents.md). HEADROOM_MODEL_* always; each SDK's own for the upstreams configured.
BASE_URL, API_KEY = "HEADROOM_MODEL_BASE_URL", "HEADROOM_MODEL_API_KEY"
OPENAI_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY")
ANTHROPIC_VARS = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")
#: How long the end of a try waits for its calls still streaming.
DRAIN_S = 5.0


def check(spec: GatewaySpec, passed_to_agent: list[str], environ: Mapping[str, str] | None = None) -> None:
    """Refuse, before anything runs, a gateway that could not serve or would hand the agent the upstream key."""
    environ = os.environ if environ is None else environ
    for name in spec.key_vars():
        if name in passed_to_agent:
            raise SpecError(
                f"{name} is the gateway's upstream key and is also handed to the agent (--agent-env); "
                "with a gateway the agent gets a per-try key instead",
                field="agent.env_passthrough",
            )
        if not environ.get(name):
            raise SpecError(f"the gateway's upstream key variable {name} is not set on this host", field="gateway")


@dataclass(frozen=True)
class TryEnd:
    """What the end of a try hands back: the measurement, the transcript spool, the key (to redact)."""

    usage: ModelUsage
    transcript: Path | None
    token: str | None


class Gateway:
    def __init__(
        self,
        spec: GatewaySpec,
        store_path: Path,
        environ: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        """``secrets``: more values to redact from every row (the run's --agent-env values)."""
        environ = os.environ if environ is None else environ
        self.spec = spec
        upstream_keys = {
            name: environ.get(u.api_key_env, "") if u.api_key_env else ""
            for name, u in (("openai", spec.openai), ("anthropic", spec.anthropic))
            if u is not None
        }
        self.keys = TryKeys()
        self.log = CallLog(Path(store_path), [*(v for v in upstream_keys.values() if v), *(v for v in secrets if v)])
        self.state = State(spec, self.keys, self.log, upstream_keys, Ledgers(spec.limits, spec.breaker))
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> Gateway:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        sock.listen(512)
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(
            uvicorn.Config(
                create_app(self.state),
                log_level="warning",
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=5,
            )
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="headroom-gateway", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the model gateway did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.log.close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def secrets(self) -> list[str]:
        """The upstream keys' values: redacted from everything headroom writes."""
        return [v for v in self.state.upstream_keys.values() if v]

    # -- tries -------------------------------------------------------------------------
    def env_for(self, key: TryKey) -> dict[str, str]:
        """The try's environment: where its model is and its own key (minted on first use)."""
        token = self.keys.open(key)
        env = {BASE_URL: self.base_url, API_KEY: token}
        if self.spec.openai is not None:
            env.update(dict(zip(OPENAI_VARS, (f"{self.base_url}/v1", token))))
        if self.spec.anthropic is not None:
            env.update(dict(zip(ANTHROPIC_VARS, (self.base_url, token))))
        return env

    @property
    def tripped(self) -> str | None:
        """Why the run's circuit breaker tripped (the provider fails most calls), or None."""
        return self.state.ledgers.tripped

    def end_try(self, key: TryKey, drain_s: float = DRAIN_S) -> TryEnd:
        """Refuse the try's key from now on, wait (briefly) for its calls still streaming, and sum its calls."""
        token = self.keys.close(key)
        deadline = time.monotonic() + drain_s
        while self.state.in_flight.get(key, 0) > 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        usage = self.log.usage(key)
        ledger = self.state.ledgers.end(key)
        working, waited = ledger.working_time(time.monotonic())
        failed = Counter(n.failure for n in ledger.notes if n.failure is not None)
        usage = usage.model_copy(
            update={
                "in_flight_at_close": self.state.in_flight.get(key, 0),
                "failures": dict(sorted(failed.items())),
                "starved": ledger.starved(),
                "limit_hit": ledger.limit_hit,
                "working_time_s": round(working, 3),
                "backoff_s": round(waited, 3),
                "usage_missing": sum(1 for n in ledger.notes if n.usage_missing),
            }
        )
        path = self.log.transcript(key)
        return TryEnd(usage, path if path.exists() else None, token)
