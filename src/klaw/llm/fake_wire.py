"""The OpenAI wire shapes the fake server answers with: scripted reply kinds (raw bytes among them),
error bodies, completion messages, streaming chunks and deterministic embeddings.

Split from `fake_server.py`, which owns serving and scripting, so each file has one job.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.responses import JSONResponse, Response

_ERROR_DEFAULTS = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "forbidden", "You do not have access to this resource."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
}


@dataclass(frozen=True)
class TextReply:
    text: str
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolCallsReply:
    calls: tuple[tuple[str, str, str], ...]  # (id, name, raw arguments JSON)
    content: str | None = None


@dataclass(frozen=True)
class ErrorReply:
    status: int
    message: str | None = None
    retry_after: float | None = None
    code: str | None = None


@dataclass(frozen=True)
class MalformedReply:
    """HTTP 200 whose body (or first stream chunk) is not valid JSON."""


@dataclass(frozen=True)
class HangReply:
    """Never answers until the server closes; when streaming, sends `partial` text first."""

    partial: str | None = None


@dataclass(frozen=True)
class RawReply:
    """Exactly these bytes, for the odd shapes real servers send: an error inside a 200 body, an SSE
    stream written by hand (comments, usage-only chunks, cut short), a wrong content type.
    Answered verbatim whether or not the request asked to stream."""

    body: bytes
    content_type: str = "application/json"
    status: int = 200


Reply = TextReply | ToolCallsReply | ErrorReply | MalformedReply | HangReply | RawReply


def echo_last_user_message(body: Mapping[str, Any]) -> Reply:
    """The default chat reply: `echo: <last user message>`."""
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return TextReply(f"echo: {users[-1].get('content') or ''}" if users else "echo:")


def fake_embedding(text: str, dim: int) -> list[float]:
    """A deterministic, deliberately not unit-length vector for `text`."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).standard_normal(dim) * 3.0]


def error_response(reply: ErrorReply) -> Response:
    kind, code, message = _ERROR_DEFAULTS.get(reply.status, ("server_error", None, "The server had an error."))
    headers = {"retry-after": f"{reply.retry_after:g}"} if reply.retry_after is not None else None
    payload = {"error": {"message": reply.message or message, "type": kind, "code": reply.code or code}}
    return JSONResponse(payload, status_code=reply.status, headers=headers)


def raw_response(reply: RawReply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=reply.content_type)


def reply_message(reply: Reply) -> tuple[dict[str, Any], str]:
    if isinstance(reply, TextReply):
        return {"role": "assistant", "content": reply.text}, reply.finish_reason
    if isinstance(reply, ToolCallsReply):
        calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in reply.calls]
        return {"role": "assistant", "content": reply.content, "tool_calls": calls}, "tool_calls"
    raise TypeError(f"not a message reply: {reply!r}")


def stream_chunks(
    model: str, message: Mapping[str, Any], finish: str, usage: Mapping[str, int] | None
) -> Iterator[dict[str, Any]]:
    """OpenAI's chunking: role first, text in word-sized pieces, each tool call's id and name once and
    then its arguments in fragments, a final chunk with the finish reason, then usage if asked."""
    yield chunk_payload(model, {"role": "assistant", "content": ""})
    for piece in re.findall(r"\s*\S+\s*", message.get("content") or ""):
        yield chunk_payload(model, {"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        yield chunk_payload(model, {"tool_calls": [head]})
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), 7):
            fragment = {"index": index, "function": {"arguments": arguments[start : start + 7]}}
            yield chunk_payload(model, {"tool_calls": [fragment]})
    yield chunk_payload(model, {}, finish)
    if usage is not None:
        yield {**chunk_payload(model, {}), "choices": [], "usage": dict(usage)}


def chunk_payload(model: str, delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


def sse_event(payload: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"
