"""A scripted model server on loopback, OpenAI- and Anthropic-compatible, for tests (it stands in for a model
provider, which cannot run here).

Routes: POST /v1/chat/completions, /v1/responses, /v1/messages (plain and streamed as server-sent events,
each with the provider's own usage fields), GET /v1/models. A conversation's reply is ``script[turn]``, where
``turn`` counts the assistant turns already in the request, so any number of conversations run at once
without state. A reply can be text, tool calls, or an error status. Usage is deterministic: input tokens =
characters of the request's messages // 4, output = characters of the reply // 4 + 1.

A reply can also hang (``hang_s``), or fail with a body and headers in a provider's own shape (a 429 with
``Retry-After``, OpenAI's ``insufficient_quota``, Anthropic's credit error); ``by_marker`` gives the requests
that mention a marker (a task's name) a script of their own.

Every request is kept (path, headers, body) so tests can check what the gateway forwarded. A wrong key gets
401 with the key echoed in the message, as some providers do (the gateway must keep it from the agent).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments": {...}}
    error: int | None = None  # answer with this status instead
    cached: int = 0  # cache-read input tokens to report
    body: dict[str, Any] | None = None  # the error's body, in the provider's own shape (default: a server error)
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Retry-After, sent with the error
    hang_s: float = 0.0  # wait this long before answering (a provider that hangs)
    pause_s: float = 0.0  # a stream waits this long after its first event (an agent can hang up meanwhile)
    stream_error: dict[str, Any] | None = None  # an Anthropic stream ends with this error event after its start


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the bytes as they came


def _chars(messages: Any) -> int:
    return len(json.dumps(messages, sort_keys=True))


class FakeModel:
    def __init__(
        self,
        script: list[Reply],
        *,
        openai_key: str | None = None,
        anthropic_key: str | None = None,
        model: str = "fake-model-1",
    ) -> None:
        self.script = script
        self.openai_key, self.anthropic_key, self.model = openai_key, anthropic_key, model
        self.seen: list[Seen] = []
        #: a request whose messages hold the marker (a task's name, say) gets that script instead
        self.by_marker: dict[str, list[Reply]] = {}
        self._closing = False
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- server ------------------------------------------------------------------------
    def __enter__(self) -> FakeModel:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *_: object) -> None:
        assert self._server is not None and self._thread is not None
        self._closing = True  # a hanging reply ends now
        self._server.should_exit = True
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- helpers -----------------------------------------------------------------------
    async def _take(self, request: Request, kind: str) -> tuple[Any, Response | None]:
        raw = await request.body()
        body = json.loads(raw)
        self.seen.append(Seen(request.url.path, dict(request.headers), body, raw))
        if kind == "anthropic":
            given, want = request.headers.get("x-api-key"), self.anthropic_key
        else:
            auth = request.headers.get("authorization", "")
            given, want = auth.removeprefix("Bearer ") if auth else None, self.openai_key
        if want is not None and given != want:
            return body, JSONResponse(
                {"error": {"message": f"Incorrect API key provided: {given}", "type": "invalid_request_error"}},
                status_code=401,
            )
        return body, None

    def _reply(self, messages: list[Any]) -> Reply:
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        text = json.dumps(messages)
        script = next((s for marker, s in self.by_marker.items() if marker in text), self.script)
        return script[min(turn, len(script) - 1)]

    async def _failed(self, reply: Reply, default: dict[str, Any]) -> Response | None:
        """A hang first (until it ends or the server stops), then the scripted error, if any."""
        waited = 0.0
        while waited < reply.hang_s and not self._closing:
            await asyncio.sleep(0.05)
            waited += 0.05
        if not reply.error:
            return None
        return JSONResponse(reply.body or default, reply.error, headers=reply.headers)

    @staticmethod
    def _usage(messages: Any, reply: Reply) -> tuple[int, int]:
        return _chars(messages) // 4, (len(reply.text) + _chars(reply.tool_calls)) // 4 + 1

    @staticmethod
    def _sse(events: list[tuple[str | None, Any]], pause_s: float = 0.0) -> StreamingResponse:
        async def gen() -> AsyncIterator[bytes]:
            for i, (name, data) in enumerate(events):
                if i == 1 and pause_s:
                    await asyncio.sleep(pause_s)
                head = f"event: {name}\n" if name else ""
                yield (head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n").encode()

        return StreamingResponse(gen(), media_type="text/event-stream")

    # -- OpenAI chat completions -------------------------------------------------------
    async def _chat(self, request: Request) -> Response:
        body, refused = await self._take(request, "openai")
        if refused:
            return refused
        reply = self._reply(body.get("messages", []))
        if failed := await self._failed(reply, {"error": {"message": "scripted failure", "type": "server_error"}}):
            return failed
        tin, tout = self._usage(body.get("messages"), reply)
        calls = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
        usage = {
            "prompt_tokens": tin,
            "completion_tokens": tout,
            "total_tokens": tin + tout,
            "prompt_tokens_details": {"cached_tokens": reply.cached},
        }
        message = {"role": "assistant", "content": reply.text or None, **({"tool_calls": calls} if calls else {})}
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": self.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                    "usage": usage,
                }
            )
        chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": self.model}
        events: list[tuple[str | None, Any]] = [
            (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        ]
        for word in reply.text.split(" "):
            events.append((None, {**chunk, "choices": [{"index": 0, "delta": {"content": word + " "}}]}))
        if calls:
            events.append(
                (
                    None,
                    {
                        **chunk,
                        "choices": [
                            {"index": 0, "delta": {"tool_calls": [{**c, "index": i} for i, c in enumerate(calls)]}}
                        ],
                    },
                )
            )
        events.append(
            (
                None,
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]},
            )
        )
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**chunk, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        return self._sse(events, reply.pause_s)

    # -- OpenAI responses --------------------------------------------------------------
    async def _responses(self, request: Request) -> Response:
        body, refused = await self._take(request, "openai")
        if refused:
            return refused
        items = (
            body.get("input")
            if isinstance(body.get("input"), list)
            else [{"role": "user", "content": body.get("input")}]
        )
        reply = self._reply(items)
        if failed := await self._failed(reply, {"error": {"message": "scripted failure", "type": "server_error"}}):
            return failed
        tin, tout = self._usage(items, reply)
        response = {
            "id": "resp_1",
            "object": "response",
            "model": self.model,
            "status": "completed",
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": reply.text}]}
            ],
            "usage": {
                "input_tokens": tin,
                "output_tokens": tout,
                "total_tokens": tin + tout,
                "input_tokens_details": {"cached_tokens": reply.cached},
            },
        }
        if not body.get("stream"):
            return JSONResponse(response)
        return self._sse(
            [
                (
                    "response.created",
                    {"type": "response.created", "response": {**response, "usage": None, "status": "in_progress"}},
                ),
                ("response.output_text.delta", {"type": "response.output_text.delta", "delta": reply.text}),
                ("response.completed", {"type": "response.completed", "response": response}),
            ]
        )

    # -- Anthropic messages ------------------------------------------------------------
    async def _messages(self, request: Request) -> Response:
        body, refused = await self._take(request, "anthropic")
        if refused:
            return refused
        reply = self._reply(body.get("messages", []))
        default = {"type": "error", "error": {"type": "overloaded_error", "message": "scripted"}}
        if failed := await self._failed(reply, default):
            return failed
        tin, tout = self._usage(body.get("messages"), reply)
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [
            {"type": "tool_use", "id": f"toolu_{i}", "name": c["name"], "input": c["arguments"]}
            for i, c in enumerate(reply.tool_calls)
        ]
        usage = {
            "input_tokens": tin - reply.cached,
            "output_tokens": tout,
            "cache_read_input_tokens": reply.cached,
            "cache_creation_input_tokens": 0,
        }
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(message)
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {**message, "content": [], "usage": {**usage, "output_tokens": 1}},
                },
            )
        ]
        if reply.stream_error is not None:  # overloaded mid-stream, as Anthropic reports it
            return self._sse([*events, ("error", reply.stream_error)])
        for i, block in enumerate(content):
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"]},
                    "usage": {"output_tokens": tout},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return self._sse(events, reply.pause_s)

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model"}]})
