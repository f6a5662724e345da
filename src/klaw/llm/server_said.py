"""What a model server said when it refused a request, never quoting what the request carried.

A server's own error message usually names the real problem (an unknown model, a context too long), so
it goes into the error a person reads; but some servers echo the input they could not handle, and
errors reach logs, chat replies, /status and the embedding queue's `last_error`, which never show
content. So a message holding a whole text of the request, or `QUOTE_CHARS` characters in a row of one,
is replaced by a note saying it was left out (klaw/llm/http.py for the chat and embedding calls,
openai_client.py for an error inside a 200 body).

An echo is often escaped: Python's `repr` or a JSON-quoting proxy writes a newline as backslash-n, so a text of
short lines ("bank: acme", "pin: 4711", …) never showed 20 characters in a row and reached `/status`
(adversary13). The message is compared as sent and with its backslash escapes undone (a newline, a tab,
a quote, a `u` and four hex digits…), and both sides also with everything but letters and digits
dropped (an echo that re-punctuates).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from klaw.llm.errors import server_message

QUOTE_CHARS = 20
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[nrtfbv0\"'\\/])")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "b": "\b", "v": "\v", "0": "\0"}


def error_message(body: bytes, payload: Mapping[str, Any]) -> str:
    """The server's own error message (see `server_said`), unless it quotes the request `payload`."""
    return unless_quoting(server_said(body), payload)


def unless_quoting(said: str, payload: Mapping[str, Any]) -> str:
    """`said` (a server's error message), or a note that it is left out when it quotes a text of the
    request `payload`: errors reach logs, chat replies and /status, which never show content."""
    if said and _quotes_any_form(said, _request_texts(payload)):
        return "the server's message quotes the request and is left out"
    return said


def _unescaped(text: str) -> str:
    """`text` with backslash escapes undone (backslash-n a newline, backslash-u00e9 an é …), whitespace
    collapsed."""

    def undo(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "ux" and len(code) > 1:
            return chr(int(code[1:], 16))
        return _SIMPLE_ESCAPES.get(code, code)

    return " ".join(_ESCAPE.sub(undo, text).split())


def _folded(text: str) -> str:
    """Letters and digits only, lower-cased: what survives any re-punctuation of an echo."""
    return "".join(char for char in text.lower() if char.isalnum())


def _quotes_any_form(said: str, texts: list[str]) -> bool:
    """`_quotes` on the message as sent, with its escapes undone, and both sides folded."""
    unescaped = _unescaped(said)
    if _quotes(said, texts) or (unescaped != said and _quotes(unescaped, texts)):
        return True
    return _quotes(_folded(unescaped), [_folded(text) for text in texts])


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
