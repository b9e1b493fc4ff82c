"""The gateway's HTTP side: OpenAI- and Anthropic-compatible routes forwarded to the configured upstream.

Per call: the per-try key (``Authorization: Bearer`` or ``x-api-key``) names the try;
the agent's credentials are dropped and the upstream's are put in their place; the
response goes back as it came (streamed event by event for server-sent events),
except that an upstream key it might echo is redacted. The call is recorded when
its response has ended, however it ended.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from orchestrator.agents.gateway import failures
from orchestrator.agents.gateway.keys import TryKeys
from orchestrator.agents.gateway.ledger import Ledgers, Note
from orchestrator.agents.gateway.recorder import REJECTED, Call, CallLog
from orchestrator.agents.gateway.usage import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    StreamUsage,
    Usage,
    from_body,
)
from orchestrator.spec.gateway import GatewaySpec

#: Path of each API on the gateway, and the upstream path appended to that upstream's base URL.
ROUTES = {
    "/v1/chat/completions": (OPENAI_CHAT, "openai", "/chat/completions"),
    "/v1/responses": (OPENAI_RESPONSES, "openai", "/responses"),
    "/v1/messages": (ANTHROPIC_MESSAGES, "anthropic", "/v1/messages"),
}
#: Request headers passed on; everything else (the agent's own credentials first) is dropped.
PASS_REQUEST = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta", "user-agent")
PASS_RESPONSE = ("content-type", "x-request-id", "request-id", "openai-processing-ms", "retry-after", "retry-after-ms")
PASS_RESPONSE_PREFIX = ("x-ratelimit-", "anthropic-ratelimit-")
MAX_RESPONSE = 64 * 1024 * 1024
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]


@dataclass
class State:
    spec: GatewaySpec
    keys: TryKeys
    log: CallLog
    upstream_keys: dict[str, str]  # upstream name -> key value
    ledgers: Ledgers
    in_flight: dict[Any, int] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # streams read on after the agent left
    client: httpx.AsyncClient | None = None

    def scrub(self, data: bytes) -> bytes:
        """An upstream key echoed in a response never reaches the agent."""
        for value in self.upstream_keys.values():
            if value:
                data = data.replace(value.encode(), b"[REDACTED]")
        return data


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _error(api: str, status: int, kind: str, message: str) -> JSONResponse:
    if api == ANTHROPIC_MESSAGES:
        return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status_code=status)
    return JSONResponse({"error": {"message": message, "type": kind, "code": kind}}, status_code=status)


def _token(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("x-api-key", "").strip()


def _upstream_headers(state: State, request: Request, upstream: str) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k.lower() in PASS_REQUEST}
    headers["accept-encoding"] = "identity"  # the usage is read from the bytes as they pass
    key = state.upstream_keys.get(upstream)
    if upstream == "anthropic":
        headers.setdefault("anthropic-version", "2023-06-01")
        if key:
            headers["x-api-key"] = key
    elif key:
        headers["authorization"] = f"Bearer {key}"
    return headers


def _response_headers(resp: httpx.Response) -> dict[str, str]:
    return {
        k: v
        for k, v in resp.headers.items()
        if k.lower() in PASS_RESPONSE or k.lower().startswith(PASS_RESPONSE_PREFIX)
    }


def _events(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete server-sent events (each with its blank-line terminator) and the rest."""
    out: list[bytes] = []
    while True:
        cuts = [(i, n) for i, n in ((buffer.find(b"\n\n"), 2), (buffer.find(b"\r\n\r\n"), 4)) if i >= 0]
        if not cuts:
            return out, buffer
        i, n = min(cuts)
        out.append(buffer[: i + n])
        buffer = buffer[i + n :]


def _retry_after(resp: httpx.Response) -> float | None:
    ms = resp.headers.get("retry-after-ms", "")  # OpenAI's finer hint, when it gives one
    if ms.strip().replace(".", "", 1).isdigit():  # a plain number only: never NaN, never a date
        return min(float(ms) / 1000, 86_400.0)
    return failures.retry_after(resp.headers.get("retry-after"))


def _ask_for_usage(doc: dict[str, Any]) -> bool:
    """Make an OpenAI chat stream carry its usage whatever the agent asked; True: the agent asked for it itself."""
    asked = doc.get("stream_options")
    wanted = isinstance(asked, dict) and asked.get("include_usage") is True
    doc["stream_options"] = {**(asked if isinstance(asked, dict) else {}), "include_usage": True}
    return wanted


def _usage_only_chunk(event: bytes) -> bool:
    """The chunk an OpenAI chat stream adds for ``include_usage``: no choices, only the usage."""
    data = b"\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:"))
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("choices") == [] and isinstance(doc.get("usage"), dict)


def create_app(state: State) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.client = httpx.AsyncClient(
            timeout=httpx.Timeout(state.spec.timeout_s, connect=30.0), follow_redirects=False, trust_env=False
        )
        try:
            yield
        finally:
            await state.client.aclose()

    def record(call: Call) -> None:
        price = state.spec.price_of(call.usage.model, call.request_model)
        u = call.usage
        if u.known and price is not None:
            call.cost_usd = price.cost(u.tokens_in or 0, u.tokens_out or 0, u.cached, u.cache_write)
        rejected = (call.error or "").startswith(REJECTED)
        if not rejected:
            if call.failure is None:
                call.failure = failures.classify(call.status, failures.parse_body(call.response[:65536]))
            if call.failure is not None:
                call.error = f"{call.failure}: {call.error or ''}"
            call.usage_missing = 200 <= call.status < 300 and not u.complete
            state.ledgers.add(
                call.key,
                Note(
                    call.started_mono,
                    time.monotonic(),
                    call.status,
                    call.failure,
                    call.retry_after,
                    (u.tokens_in or 0) + (u.tokens_out or 0),
                    call.cost_usd or 0.0,
                    call.usage_missing,
                ),
            )
        state.log.submit(call)

    def refuse(api: str, call: Call, why: str) -> Response:
        """A call the try's spent limit forbids: on record, never forwarded."""
        call.status, call.failure, call.error = 403, failures.LIMIT, why
        call.latency_s = time.monotonic() - call.started_mono
        record(call)
        return _error(api, 403, "limit_exceeded", why)

    def proxy(api: str, upstream: str, upstream_path: str):
        async def handle(request: Request) -> Response:
            started, t0 = _now(), time.monotonic()
            token = _token(request)
            holder = state.keys.lookup(token)
            if holder is None:
                return _error(api, 401, "authentication_error", "not a key this gateway issued")
            body = await request.body()
            if not holder.active:
                record(
                    Call(
                        holder.key,
                        started,
                        api,
                        request.url.path,
                        401,
                        time.monotonic() - t0,
                        False,
                        error=f"{REJECTED} the try this key belongs to has ended",
                        request=body,
                        started_mono=t0,
                        token=token,
                    )
                )
                return _error(api, 401, "authentication_error", "this try's key has expired: the try has ended")
            base = getattr(state.spec, upstream)
            if base is None:
                return _error(api, 404, "not_found_error", f"this gateway has no {upstream} upstream")
            if len(body) > state.spec.max_request_bytes:
                return _error(api, 413, "invalid_request_error", "request too large for the gateway")
            doc: Any = None
            try:
                doc = json.loads(body)
            except ValueError:
                pass
            request_model = doc.get("model") if isinstance(doc, dict) and isinstance(doc.get("model"), str) else None
            streamed = isinstance(doc, dict) and doc.get("stream") is True
            strip_usage = False
            if streamed and api == OPENAI_CHAT:
                # Without it an OpenAI stream carries no usage at all, and an agent could hide its tokens by
                # asking for none: the gateway always asks, and hands the agent only what it asked for.
                strip_usage = not _ask_for_usage(doc)
            if isinstance(doc, dict):
                # The upstream gets the request as the gateway read it: a body another parser would read
                # otherwise (a key given twice: "stream" false then true) cannot stream past the usage option.
                body = json.dumps(doc).encode()
            call = Call(
                holder.key,
                started,
                api,
                request.url.path,
                0,
                0.0,
                streamed,
                request_model=request_model,
                request=body,
                started_mono=t0,
                token=token,
            )
            limits = state.spec.limits
            if (spent := state.ledgers.check(holder.key)) is not None:
                return refuse(api, call, f"this try's {spent.replace('_', '-')} limit is spent")
            if limits.cost_usd is not None and state.spec.price_of(request_model) is None:
                return refuse(api, call, f"no price for model {request_model!r}, and this try has a cost limit")
            assert state.client is not None
            upstream_req = state.client.build_request(
                "POST", base.base_url + upstream_path, content=body, headers=_upstream_headers(state, request, upstream)
            )
            state.in_flight[holder.key] = state.in_flight.get(holder.key, 0) + 1
            try:
                resp = await state.client.send(upstream_req, stream=True)
            except httpx.HTTPError as exc:
                state.in_flight[holder.key] -= 1
                timed_out = isinstance(exc, httpx.TimeoutException)
                call.status, call.latency_s = (504 if timed_out else 502), time.monotonic() - t0
                call.failure = failures.TIMEOUT if timed_out else failures.CONNECTION
                what = "did not answer in time" if timed_out else "unreachable"
                call.error = f"upstream {what}: {type(exc).__name__}: {exc}"
                record(call)
                return _error(
                    api, call.status, "api_error", f"the gateway could not reach the upstream ({type(exc).__name__})"
                )
            call.status = resp.status_code
            call.retry_after = _retry_after(resp)
            headers = _response_headers(resp)
            if resp.headers.get("content-type", "").startswith("text/event-stream"):
                relay = Relay(resp, call, StreamUsage(api), strip_usage)
                return StreamingResponse(relay.events(), status_code=resp.status_code, headers=headers)
            try:
                data = await _read(resp)
            except httpx.HTTPError as exc:
                call.failure = failures.TIMEOUT if isinstance(exc, httpx.TimeoutException) else failures.CONNECTION
                call.error = f"upstream response broke off: {type(exc).__name__}: {exc}"
                data = b""
            finally:
                await resp.aclose()
                state.in_flight[holder.key] -= 1
            call.streamed = False
            data = state.scrub(data)
            try:
                from_body(api, json.loads(data), call.usage)
            except ValueError:
                pass
            if resp.status_code >= 400 and call.error is None:
                call.error = data[:2000].decode("utf-8", "replace")
            call.response, call.latency_s = data, time.monotonic() - t0
            record(call)
            return Response(data, status_code=resp.status_code, headers=headers)

        return handle

    class Relay:
        """One streamed response, relayed event by event. When the agent goes away before the stream ends, the
        rest is still read from the upstream (bounded by the gateway's timeout), so the usage that comes last
        (OpenAI's usage chunk, Anthropic's message_delta) is counted: leaving early hides no tokens."""

        def __init__(self, resp: httpx.Response, call: Call, parser: StreamUsage, strip_usage: bool) -> None:
            self.resp, self.call, self.parser, self.strip_usage = resp, call, parser, strip_usage
            parser.usage = call.usage
            self.kept: list[bytes] = []
            self.size = 0
            self.buffer = b""
            self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=64)
            self.listening = True  # the agent is still reading

        def take(self, chunk: bytes, tail: bool = False) -> list[bytes]:
            if tail:
                events, self.buffer = ([self.buffer + chunk] if self.buffer + chunk else []), b""
            else:
                events, self.buffer = _events(self.buffer + chunk)
            out = []
            for event in events:
                event = state.scrub(event)
                self.parser.feed(event)
                if self.parser.error is not None and self.call.failure is None:
                    self.call.failure = failures.classify(200, self.parser.error)
                    self.call.error = json.dumps(self.parser.error)[:2000]
                if self.size < MAX_RESPONSE:
                    self.kept.append(event)
                    self.size += len(event)
                if not (self.strip_usage and _usage_only_chunk(event)):
                    out.append(event)
            return out

        async def events(self) -> AsyncIterator[bytes]:
            pump = asyncio.get_running_loop().create_task(self.pump())
            state.tasks.add(pump)  # a task of its own: the agent hanging up cancels this generator, not the reading
            pump.add_done_callback(state.tasks.discard)
            try:
                while (event := await self.queue.get()) is not None:
                    yield event
            except BaseException:  # the agent went away mid-stream: the pump reads on, then records the call
                self.listening = False
                while not self.queue.empty():
                    self.queue.get_nowait()  # frees a pump waiting to hand over an event
                if self.call.error is None:
                    self.call.error = "the agent closed the connection before the stream ended"
                raise

        async def pump(self) -> None:
            try:
                async for chunk in self.resp.aiter_bytes():
                    for event in self.take(chunk):
                        await self.hand_over(event)
                for event in self.take(b"", tail=True):
                    await self.hand_over(event)
            except httpx.HTTPError as exc:
                self.broke_off(exc)
            except Exception as exc:  # noqa: BLE001 -- whatever stopped the reading, the call is recorded
                self.call.error = f"the gateway stopped reading the stream: {type(exc).__name__}"
            finally:
                await self.finish()  # recorded before the agent sees the end
                await self.hand_over(None)

        async def hand_over(self, event: bytes | None) -> None:
            if not self.listening:
                return
            if not self.queue.full():
                self.queue.put_nowait(event)  # the common case, without a timer per event
                return
            try:
                await asyncio.wait_for(self.queue.put(event), state.spec.timeout_s)
            except TimeoutError:  # the agent stopped reading for as long as a call may take: read on without it
                self.listening = False

        def broke_off(self, exc: httpx.HTTPError) -> None:
            self.call.failure = failures.TIMEOUT if isinstance(exc, httpx.TimeoutException) else failures.CONNECTION
            self.call.error = f"upstream stream broke off: {type(exc).__name__}: {exc}"

        async def finish(self) -> None:
            call = self.call
            await self.resp.aclose()
            state.in_flight[call.key] -= 1
            call.streamed, call.response = True, b"".join(self.kept)
            call.latency_s = time.monotonic() - call.started_mono
            if self.resp.status_code >= 400 and call.error is None:
                call.error = call.response[:2000].decode("utf-8", "replace")
            record(call)

    async def models(request: Request) -> Response:
        holder = state.keys.lookup(_token(request))
        if holder is None or not holder.active:
            return _error(OPENAI_CHAT, 401, "authentication_error", "not a valid key of a running try")
        if state.spec.openai is None:
            return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in state.spec.prices]})
        assert state.client is not None
        try:
            resp = await state.client.get(
                state.spec.openai.base_url + "/models", headers=_upstream_headers(state, request, "openai")
            )
        except httpx.HTTPError as exc:
            return _error(
                OPENAI_CHAT, 502, "api_error", f"the gateway could not reach the upstream ({type(exc).__name__})"
            )
        return Response(state.scrub(resp.content), status_code=resp.status_code, headers=_response_headers(resp))

    routes = [Route(path, proxy(*spec), methods=["POST"]) for path, spec in ROUTES.items()]
    routes.append(Route("/v1/models", models, methods=["GET"]))
    return Starlette(
        routes=routes, lifespan=lifespan, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=ALLOWED_HOSTS)]
    )


async def _read(resp: httpx.Response) -> bytes:
    parts, size = [], 0
    async for chunk in resp.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE:
            raise httpx.ReadError(f"response larger than {MAX_RESPONSE} bytes")
    return b"".join(parts)


__all__ = ["ROUTES", "State", "Usage", "create_app"]
