"""A real HTTP server speaking the OpenAI wire format, scripted by tests and benchmarks.

It lives in the package, not under tests, because `klaw bench turn` and end-to-end tests drive the
whole engine through it: the client, retries, SSE parsing and the engine's context building are
all exercised over a real socket, exactly as against Ollama or OpenAI, without a model.

    async with FakeOpenAiServer() as server:
        server.reply_text("hi")                     # next chat reply; then echo of the last user message
        config = ModelConfig(base_url=server.base_url)
        ...
        server.requests[-1].body["messages"]        # what the client sent

Replies are queued per endpoint (chat, embeddings) and consumed in order; an empty chat queue falls
back to `default_reply` (echo of the last user message), an empty embeddings queue to the inputs'
vectors. `latency` / `before=` are awaited before a reply (`latency` before the model list too), so a
benchmark can simulate a slow model and a test can hold a reply (or, with `reply_embeddings(before=...)`,
one embeddings request) until it says so. uvicorn runs inside the current event loop
(`klaw.embedded_http`); hung replies are released on exit so shutdown is quick.

`python -m klaw.llm.fake_server [PORT]` runs it alone as a stand-in model that echoes your last message
and calls a tool when asked with `!TOOL {json}` (stand_in.py), to try klaw before you have a model
(README, "No model yet?").
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from klaw.embedded_http import EmbeddedHttpServer
from klaw.llm.fake_wire import (
    ErrorReply,
    HangReply,
    MalformedReply,
    RawReply,
    Reply,
    TextReply,
    ToolCallsReply,
    chunk_payload,
    echo_last_user_message,
    error_response,
    fake_embedding,
    raw_response,
    reply_message,
    sse_event,
    stream_chunks,
)
from klaw.llm.tokens import approximate_token_count

__all__ = [
    "ErrorReply",
    "FakeOpenAiServer",
    "HangReply",
    "MalformedReply",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "TextReply",
    "ToolCallsReply",
    "echo_last_user_message",
    "fake_embedding",
]

Endpoint = Literal["chat", "embeddings"]
# Awaited only for its timing, so any awaitable works, e.g. `asyncio.Event().wait` (which returns True).
Before = Callable[[], Awaitable[object]]
_SHUTDOWN_GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: Any  # parsed JSON, None for GET or unparsable bodies


@dataclass
class _Queued:
    reply: Reply | None  # None: the endpoint's usual answer (the default chat reply, the inputs' vectors)
    before: Before | None = None


@dataclass(eq=False)
class FakeOpenAiServer:
    """See the module docstring. `known_models`: other model names are a 404 as on OpenAI (chat and
    embeddings alike). `max_input_tokens`: a longer embeddings input is a 400 naming the limit, as
    OpenAI answers a text over its embedding model's context length."""

    embedding_dim: int = 16
    default_reply: Callable[[Mapping[str, Any]], Reply] = echo_last_user_message
    latency: Before | None = None
    known_models: Sequence[str] | None = None
    reverse_embeddings: bool = False  # answer embeddings out of order, to test ordering by `index`
    max_input_tokens: int | None = None
    listen_port: int = 0  # 0: any free port (tests); `python -m klaw.llm.fake_server PORT` picks one
    keep_requests: int | None = None  # None: every request (tests read them); a long-running server keeps the last N
    serves_models: bool = True  # False: no GET /v1/models, as some proxies have none
    requests: list[RecordedRequest] = field(default_factory=list, init=False)
    _queues: dict[str, deque[_Queued]] = field(init=False)
    _closing: asyncio.Event = field(init=False)
    _http: EmbeddedHttpServer | None = field(default=None, init=False)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), init=False)

    def __post_init__(self) -> None:
        self._queues = {"chat": deque(), "embeddings": deque()}
        self._closing = asyncio.Event()

    # -- scripting ------------------------------------------------------------------------------

    def reply(self, reply: Reply, *, endpoint: Endpoint = "chat", before: Before | None = None) -> None:
        self._queues[endpoint].append(_Queued(reply, before))

    def reply_text(self, text: str, *, before: Before | None = None) -> None:
        self.reply(TextReply(text), before=before)

    def reply_tool_calls(
        self,
        calls: Sequence[tuple[str, Mapping[str, Any] | str]],
        *,
        content: str | None = None,
        before: Before | None = None,
    ) -> None:
        """Calls as (name, arguments); a str argument is sent verbatim, so invalid JSON can be scripted."""
        wire = tuple(
            (f"call_{next(self._ids)}", name, args if isinstance(args, str) else json.dumps(args))
            for name, args in calls
        )
        self.reply(ToolCallsReply(wire, content), before=before)

    def reply_embeddings(self, *, before: Before | None = None) -> None:
        """The next embeddings request gets its usual answer (the inputs' vectors), after `before`: with
        a hook that waits for an event, a test holds that one request while it checks what goes on meanwhile."""
        self._queues["embeddings"].append(_Queued(None, before))

    def reply_error(
        self,
        status: int,
        *,
        message: str | None = None,
        retry_after: float | None = None,
        code: str | None = None,
        endpoint: Endpoint = "chat",
    ) -> None:
        self.reply(ErrorReply(status, message, retry_after, code), endpoint=endpoint)

    def reply_malformed(self, *, endpoint: Endpoint = "chat") -> None:
        self.reply(MalformedReply(), endpoint=endpoint)

    def reply_raw(
        self,
        body: bytes | str,
        *,
        content_type: str = "application/json",
        status: int = 200,
        endpoint: Endpoint = "chat",
    ) -> None:
        """The next reply is exactly `body` (a str is sent as UTF-8), for shapes no other reply kind
        makes: an error inside a 200 body, a hand-written SSE stream, a wrong content type."""
        raw = body.encode() if isinstance(body, str) else body
        self.reply(RawReply(raw, content_type, status), endpoint=endpoint)

    def reply_hang(self, *, partial: str | None = None, endpoint: Endpoint = "chat") -> None:
        self.reply(HangReply(partial), endpoint=endpoint)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._http is None:
            raise RuntimeError("the fake server is not running; use `async with FakeOpenAiServer()`")
        return self._http.port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeOpenAiServer:
        self._closing = asyncio.Event()
        http = EmbeddedHttpServer(
            self._app(),
            "127.0.0.1",
            self.listen_port,
            grace_seconds=_SHUTDOWN_GRACE_SECONDS,
            http="h11",
            name="fake-openai-server",
        )
        await http.start()
        self._http = http
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing.set()  # release hung replies first, or shutdown would wait for them
        if self._http is not None:
            await self._http.stop()
        self._http = None

    # -- the HTTP app ---------------------------------------------------------------------------

    def _app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
        ]
        if self.serves_models:
            routes.append(Route("/v1/models", self._models, methods=["GET"]))
        return Starlette(routes=routes)

    async def _record(self, request: Request) -> Any:
        try:
            body = json.loads(await request.body()) if request.method == "POST" else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(RecordedRequest(request.method, request.url.path, headers, body))
        if self.keep_requests is not None and len(self.requests) > self.keep_requests:
            del self.requests[: len(self.requests) - self.keep_requests]
        return body

    async def _next(self, endpoint: Endpoint, body: Any) -> Reply | None:
        queued = self._queues[endpoint].popleft() if self._queues[endpoint] else None
        if self.latency is not None:
            await self.latency()
        if queued is not None and queued.before is not None:
            await queued.before()
        if queued is None or queued.reply is None:
            return self.default_reply(body) if endpoint == "chat" else None
        return queued.reply

    async def _chat(self, request: Request) -> Response:
        body = await self._record(request)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error_response(ErrorReply(400, "'messages' is a required property"))
        if (unknown := self._unknown_model(body)) is not None:
            return unknown
        model = str(body.get("model", ""))
        reply = await self._next("chat", body)
        stream = bool(body.get("stream"))
        if isinstance(reply, ErrorReply):
            return error_response(reply)
        if isinstance(reply, RawReply):
            return raw_response(reply)
        if isinstance(reply, MalformedReply):
            if stream:
                garbage = 'data: {"id": "chatcmpl-1", "choices": [\n\n'
                return StreamingResponse(_lines([garbage]), media_type="text/event-stream")
            return Response('{"id": "chatcmpl-1", "choices": [', media_type="application/json")
        if isinstance(reply, HangReply):
            if stream and reply.partial is not None:
                chunks = [sse_event(chunk_payload(model, {"role": "assistant", "content": reply.partial}))]
                return StreamingResponse(self._then_hang(chunks), media_type="text/event-stream")
            await self._closing.wait()
            return error_response(ErrorReply(503, "The server is shutting down."))
        assert reply is not None
        message, finish = reply_message(reply)
        prompt = sum(approximate_token_count(str(m.get("content") or "")) for m in body["messages"])
        completion = approximate_token_count(json.dumps(message))
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        if stream:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [sse_event(c) for c in stream_chunks(model, message, finish, usage if include_usage else None)]
            return StreamingResponse(_lines([*events, "data: [DONE]\n\n"]), media_type="text/event-stream")
        return JSONResponse(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )

    async def _then_hang(self, chunks: list[str]) -> AsyncIterator[str]:
        for chunk in chunks:
            yield chunk
        await self._closing.wait()

    def _unknown_model(self, body: Mapping[str, Any]) -> Response | None:
        """OpenAI's 404 for a model name it does not serve, when `known_models` is set."""
        model = str(body.get("model", ""))
        if self.known_models is None or model in self.known_models:
            return None
        return error_response(ErrorReply(404, f"The model `{model}` does not exist or you do not have access to it."))

    async def _embeddings(self, request: Request) -> Response:
        body = await self._record(request)
        if isinstance(body, dict) and (unknown := self._unknown_model(body)) is not None:
            return unknown
        reply = await self._next("embeddings", body)
        if isinstance(reply, ErrorReply):
            return error_response(reply)
        if isinstance(reply, RawReply):
            return raw_response(reply)
        if isinstance(reply, MalformedReply):
            return Response('{"data": [', media_type="application/json")
        if isinstance(reply, HangReply):
            await self._closing.wait()
            return error_response(ErrorReply(503, "The server is shutting down."))
        texts = body.get("input") if isinstance(body, dict) else None
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list):
            return error_response(ErrorReply(400, "'input' is a required property"))
        longest = max((approximate_token_count(str(t)) for t in texts), default=0)
        if self.max_input_tokens is not None and longest > self.max_input_tokens:
            return error_response(
                ErrorReply(
                    400,
                    f"This model's maximum context length is {self.max_input_tokens} tokens, however you "
                    f"requested {longest} tokens. Please reduce your prompt.",
                )
            )
        data = [
            {"object": "embedding", "index": i, "embedding": fake_embedding(str(t), self.embedding_dim)}
            for i, t in enumerate(texts)
        ]
        if self.reverse_embeddings:
            data.reverse()
        tokens = sum(approximate_token_count(str(t)) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _models(self, request: Request) -> Response:
        await self._record(request)
        if self.latency is not None:
            await self.latency()
        names = self.known_models if self.known_models is not None else ["fake-model"]
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": name, "object": "model", "created": 0, "owned_by": "klaw-fake"} for name in names],
            }
        )


async def _lines(lines: Sequence[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


if __name__ == "__main__":  # `python -m klaw.llm.fake_server [PORT]`: the stand-in model (stand_in.py)
    from klaw.llm.stand_in import main

    main()
