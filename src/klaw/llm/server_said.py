"""What a model server said when it refused a request, never quoting what the request carried.

A server's own error message usually names the real problem (an unknown model, a context too long), so
it goes into the error a person reads; but some servers echo the input they could not handle, and
errors reach logs, chat replies, /status and the embedding queue's `last_error`, which never show
content. So a message holding a whole text of the request, or `QUOTE_CHARS` characters in a row of one,
is replaced by a note saying it was left out (klaw/llm/http.py for the chat and embedding calls,
openai_client.py for an error inside a 200 body).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from klaw.llm.errors import server_message

QUOTE_CHARS = 20


def error_message(body: bytes, payload: Mapping[str, Any]) -> str:
    """The server's own error message (see `server_said`), unless it quotes the request `payload`."""
    return unless_quoting(server_said(body), payload)


def unless_quoting(said: str, payload: Mapping[str, Any]) -> str:
    """`said` (a server's error message), or a note that it is left out when it quotes a text of the
    request `payload`: errors reach logs, chat replies and /status, which never show content."""
    if said and _quotes(said, _request_texts(payload)):
        return "the server's message quotes the request and is left out"
    return said


def _request_texts(payload: Mapping[str, Any]) -> list[str]:
    """What a request carries that is content: chat messages' text and tool-call arguments, embedding
    inputs; whitespace collapsed as `server_message` does."""
    texts: list[Any] = []
    inputs = payload.get("input")
    texts.extend(inputs if isinstance(inputs, list) else [inputs])
    for message in payload.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        texts.extend(part.get("text") if isinstance(part, Mapping) else part for part in parts)
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            texts.append(function.get("arguments") if isinstance(function, Mapping) else None)
    return [" ".join(text.split()) for text in texts if isinstance(text, str)]


def _quotes(said: str, texts: list[str]) -> bool:
    """Whether `said` contains a whole text, or `QUOTE_CHARS` characters in a row of one, of `texts`
    (a server that echoes an input often shortens it). Texts shorter than 8 characters ("hi") are
    too common to count."""
    pieces = {said[i : i + QUOTE_CHARS] for i in range(len(said) - QUOTE_CHARS + 1)}
    for text in texts:
        if len(text) < QUOTE_CHARS:
            if len(text) >= 8 and text in said:
                return True
        elif any(piece in text for piece in pieces):
            return True
    return False


def server_said(body: bytes) -> str:
    """The server's own error message, from OpenAI's `{"error": {"message"}}` or the common variants
    (vLLM's top-level `message`, FastAPI's `detail`). Non-JSON bodies (proxy pages) give ''."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    for candidate in (
        error.get("message") if isinstance(error, dict) else error,
        data.get("message"),
        data.get("detail"),
    ):
        if isinstance(candidate, str) and candidate.strip():
            return server_message(candidate)
    return ""
