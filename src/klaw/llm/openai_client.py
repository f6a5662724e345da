"""The chat client for any OpenAI-compatible `/chat/completions` endpoint.

One implementation serves OpenAI, Ollama, vLLM, llama.cpp server and OpenRouter, because they all
speak the same wire format; provider quirks are absorbed in `klaw.llm.messages` (lenient parsing)
rather than in per-provider clients.

Retries and timeouts follow `klaw.llm.http`: 429, 5xx and connection failures are retried up to
`max_retries` times with backoff (honouring Retry-After); a timeout — `timeout_seconds` without a
byte from the server, which for streams means between two chunks — raises `LlmTimeoutError` at
once, because a user waiting on a chat reply is better told after one hung call than after four.
A stream is only retried before its first byte; once deltas have been handed out a broken stream
raises, since the caller may already have shown the text. A whole call, retries and a streamed answer
included, ends at the model's `totalTimeoutSeconds` (llm/call_deadline.py, decision 298): a server
trickling a byte now and then never lets a read wait `timeout_seconds`.

An answer longer than `MAX_ANSWER_CHARS` (text and tool arguments together) ends the call with an
error: a server that never stops writing filled the log, the database and every later search with
megabytes (10 MB took three minutes to arrive and stalled the other chats meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing
from typing import Any, cast

import httpx

from klaw.config import ModelConfig
from klaw.llm.answer_cap import MAX_ANSWER_CHARS, answer_chars, parsed, too_long
from klaw.llm.call_deadline import deadline_of, within_deadline
from klaw.llm.call_errors import malformed, reading_errors
from klaw.llm.endpoint import Endpoint, RetryPolicy, Sleep
from klaw.llm.errors import LlmError, LlmServerError, server_message
from klaw.llm.http import RetryingPoster
from klaw.llm.http_client import new_http_client
from klaw.llm.messages import (
    ChatMessage,
    ChatResponse,
    StreamDelta,
    ToolCallFragment,
    ToolSpec,
    WireFormatError,
)
from klaw.llm.server_said import unless_quoting
from klaw.llm.wire_body import ToolsJson, request_body
from klaw.strict_json import SplitPairs

logger = logging.getLogger(__name__)

# A chunk carrying nothing counts as this many characters toward MAX_ANSWER_CHARS (`_weight`, decision 334).
EMPTY_CHUNK_WEIGHT = 100
_REASONING = ("reasoning_content", "reasoning")
_NOTHING_KEYS = frozenset({"role", "content"})  # a role says nothing; content's text is counted already


class OpenAiChatClient:
    """A `ChatModel` backed by an OpenAI-compatible HTTP API.

    Pass `http` to share one connection pool between models on the same base URL (the router does); the
    client then does not close it. Without it the client makes its own and closes it in `aclose`. `env` is
    where the API key is looked up, by the variable name in `config.api_key_env`, at each request, so the
    key is never stored or logged.

    Streams are async generators: close them (`contextlib.aclosing`) when stopping early, so the
    connection is released at once rather than when the generator is garbage-collected.
    """

    def __init__(
        self,
        model_id: str,
        config: ModelConfig,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep = asyncio.sleep,
        env: Mapping[str, str] = os.environ,
        retry_policy: RetryPolicy | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.model_id = model_id
        self.config = config
        self._owns_http = http is None
        self._http = http if http is not None else new_http_client(config.base_url)
        self._endpoint = Endpoint(
            model_id=model_id,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            timeout_seconds=config.timeout_seconds,
            max_retries=config.max_retries,
            section=f"models.{model_id}",
            connect_timeout_seconds=config.connect_timeout_seconds,
            total_timeout_seconds=config.call_deadline_seconds,
        )
        self._poster = RetryingPoster(self._http, self._endpoint, env, sleep, retry_policy or RetryPolicy(), rand)
        self._tools_json = ToolsJson()  # the tools' JSON, encoded once while a turn offers the same ones

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """Send the conversation and return the whole answer."""
        payload = self._payload(messages, tools, temperature, max_tokens, stream=False)
        started = time.monotonic()
        async with within_deadline(self._endpoint, deadline_of(self._endpoint)):  # decision 298
            body = await self._poster.post_json("chat/completions", payload, self._body(payload, tools))
        self._raise_for_error_body(body, payload)
        try:
            response = ChatResponse.from_wire(body)
        except WireFormatError as exc:
            raise malformed(self._endpoint, f"the response is not a chat completion: {exc}") from exc
        self._check_length(answer_chars(response.content, (call.arguments for call in response.tool_calls)))
        logger.debug(
            "llm complete model=%s finish=%s tool_calls=%d duration_ms=%.0f",
            self.model_id,
            response.finish_reason,
            len(response.tool_calls),
            (time.monotonic() - started) * 1000,
        )
        return response

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamDelta, None]:
        """Send the conversation and yield the answer as it is generated (server-sent events)."""
        payload = self._payload(messages, tools, temperature, max_tokens, stream=True)
        started = time.monotonic()
        chunks = 0
        written = 0
        endpoint = self._endpoint
        deadline = deadline_of(endpoint)  # each wait below ends there: the whole call's limit (decision 298)
        async with AsyncExitStack() as stack:
            async with within_deadline(endpoint, deadline):
                opening = self._poster.open("chat/completions", payload, self._body(payload, tools))
                response = await stack.enter_async_context(opening)
            if "json" in response.headers.get("content-type", ""):
                # The server ignored `stream: true` and answered in one piece: hand it out as one delta.
                async with within_deadline(endpoint, deadline):
                    with reading_errors(endpoint):
                        body = await response.aread()
                yield self._whole_as_delta(body, payload)
                return
            finished = False
            pairs = SplitPairs()  # a character whose halves came in two chunks is joined back
            lines = cast(AsyncGenerator[str, None], response.aiter_lines())  # httpx's is a generator
            await stack.enter_async_context(aclosing(lines))
            while True:
                async with within_deadline(endpoint, deadline):
                    with reading_errors(endpoint):
                        line = await anext(lines, None)
                if line is None:
                    break
                if not line.startswith("data:"):
                    continue  # blank separators, `: keep-alive` comments, `event:` lines
                data = line[5:].strip()
                if data == "[DONE]":
                    finished = True
                    break
                delta, wire = self._parse_chunk(data, payload, pairs)
                # a chunk carrying nothing weighs EMPTY_CHUNK_WEIGHT: an endless stream of them ends (decision 334)
                written += answer_chars(delta.content, (f.arguments for f in delta.tool_calls)) or _weight(wire)
                self._check_length(written, streamed=True)
                chunks += 1
                finished = finished or delta.finish_reason is not None
                yield delta
                if not chunks & 255:
                    # asyncio's reader returns at once while its buffer holds bytes: a server sending faster than
                    # this loop reads would keep the other chats waiting (0.86 s seen) without this pause
                    await asyncio.sleep(0)
            if not finished:
                raise malformed(self._endpoint, "the stream ended before the model finished its answer")
            if rest := pairs.rest():  # a first half whose second never came: U+FFFD, where it was
                yield _rest_as_delta(rest)
        logger.debug(
            "llm stream model=%s chunks=%d duration_ms=%.0f",
            self.model_id,
            chunks,
            (time.monotonic() - started) * 1000,
        )

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    def _payload(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None,
        temperature: float | None,
        max_tokens: int | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.config.provider_model_name(self.model_id),
            "messages": [message.to_wire() for message in messages],
        }
        if tools:
            payload["tools"] = None  # its place: `_body` writes the tools' JSON there, kept between calls
        if temperature is not None:
            payload["temperature"] = temperature
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}  # usage arrives in a last, choice-less chunk
        return payload

    def _body(self, payload: Mapping[str, Any], tools: Sequence[ToolSpec] | None) -> bytes:
        """The request's bytes, the tools' JSON as kept since the last call offering them (`wire_body.py`)."""
        return request_body(payload, self._tools_json.of(tools) if tools else None)

    def _parse_chunk(self, data: str, payload: Mapping[str, Any], pairs: SplitPairs) -> tuple[StreamDelta, Any]:
        """The chunk as a `StreamDelta`, and as it came (for `_weight`)."""
        chunk = parsed(data, self._malformed, "a stream chunk")
        self._raise_for_error_body(chunk, payload)
        try:
            return StreamDelta.from_wire(chunk, pairs), chunk
        except WireFormatError as exc:
            raise malformed(self._endpoint, f"a stream chunk is not a chat completion chunk: {exc}") from exc

    def _whole_as_delta(self, body: bytes, payload: Mapping[str, Any]) -> StreamDelta:
        wire = parsed(body, self._malformed, "the response")
        self._raise_for_error_body(wire, payload)
        try:
            whole = ChatResponse.from_wire(wire)
        except WireFormatError as exc:
            raise malformed(self._endpoint, f"the response is not a chat completion: {exc}") from exc
        self._check_length(answer_chars(whole.content, (call.arguments for call in whole.tool_calls)))
        fragments = tuple(
            ToolCallFragment(index=i, id=call.id, name=call.name, arguments=call.arguments)
            for i, call in enumerate(whole.tool_calls)
        )
        return StreamDelta(whole.content, fragments, whole.finish_reason, whole.usage, whole.model)

    def _malformed(self, what: str) -> LlmError:
        return malformed(self._endpoint, what)

    def _check_length(self, chars: int, *, streamed: bool = False) -> None:
        if chars > MAX_ANSWER_CHARS:
            counted = f" (a chunk of its stream carrying nothing counts as {EMPTY_CHUNK_WEIGHT})" if streamed else ""
            raise too_long(MAX_ANSWER_CHARS, self._endpoint.model_id, self._endpoint.base_url, counted)

    def _raise_for_error_body(self, body: Any, payload: Mapping[str, Any]) -> None:
        """Some servers (OpenRouter mid-stream, a few proxies) report failures in a 200 body; their
        message is left out when it quotes the request, as for any error status."""
        if isinstance(body, dict) and "error" in body and "choices" not in body:
            error = body["error"]
            said = error.get("message") if isinstance(error, dict) else error
            message = unless_quoting(server_message(said), payload) if isinstance(said, str) else "no message"
            raise self._endpoint.error(
                LlmServerError,
                f"the server reported an error: {message}",
                "Check the server's logs, or try again later.",
            )


def _rest_as_delta(rest: Mapping[object, str]) -> StreamDelta:
    """What `SplitPairs.rest` kept back, as one last delta: the answer's text, each call's arguments."""
    fragments = tuple(ToolCallFragment(key, arguments=text) for key, text in rest.items() if isinstance(key, int))
    return StreamDelta(rest.get("content"), fragments)


def _weight(chunk: Any) -> int:
    """What a chunk without text or tool arguments counts toward `MAX_ANSWER_CHARS` (decision 334): a thinking
    model's reasoning by its characters (`reasoning_content`: DeepSeek, vLLM; `reasoning`: Ollama, OpenRouter),
    anything else its delta carries as one character, as before; a chunk carrying nothing (an empty delta, a
    role alone, `content: ""`) `EMPTY_CHUNK_WEIGHT`. A real answer has a handful of those (role, finish,
    usage); an endless stream of them now ends after 20,000 instead of 2,000,000 (minutes of CPU)."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
    if not isinstance(delta, dict):
        return EMPTY_CHUNK_WEIGHT
    reasoning = sum(len(text) for key in _REASONING if isinstance(text := delta.get(key), str))
    if reasoning:
        return reasoning
    if any(value for key, value in delta.items() if key not in _NOTHING_KEYS):
        return 1
    return EMPTY_CHUNK_WEIGHT
