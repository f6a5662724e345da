"""A model server's answer, read at most a bounded number of bytes (decision 317).

httpx reads a body whole (`aread`) and a line of a stream until its newline: a server answering without
end, or one line without end, was read into memory until the call's `totalTimeoutSeconds` (14 GB for a
piped `klaw chat`; 300 MB of junk in one answer took 900 MB and was accepted). klaw's limit on an answer,
`MAX_ANSWER_CHARS`, applied only once it was all read and parsed.

Here the answer's bytes pass through a counting stream put under the response (`capped`), as decision 309
does for a URL MCP server's answers (that one is httpx2's, for the MCP SDK; this one httpx's): a whole
body past `MAX_BODY_BYTES`, or one line of a stream past it (a line carries one chunk of the answer, which
a server may send whole), fails the read with a worded `LlmMalformedResponseError`, never retried. A stream
in total is not bounded in bytes but in what it carries (`openai_client` counts its characters and its
empty chunks). klaw asks for answers uncompressed (`IDENTITY`); one compressed anyway (gzip, deflate) is
unpacked a bounded piece at a time (`klaw/unpacking.py`, decision 333) and the count is of the unpacked bytes,
so a decompression bomb is cut at the same cap, with the same words.

An error status's body is read at most `ERROR_BODY_BYTES` (`excerpt`, unpacked too): only a 300-character
excerpt of the server's message is ever shown.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx

from klaw.llm.errors import LlmError, LlmMalformedResponseError
from klaw.unpacking import CodingError, codings, unpacked

# ~500,000 tokens: above any model's output limit, and above a reply the engine's socket must still carry
# in parts (tests/engine/test_turn_failures.py sends 1.8 million characters).
MAX_ANSWER_CHARS = 2_000_000
# An answer of MAX_ANSWER_CHARS characters each written as a 6-byte `\uXXXX` escape, with room for the JSON
# around it; also 100 embeddings of 4,096 dimensions (~9 MB), the largest batch the embedder asks for.
MAX_BODY_BYTES = 8 * MAX_ANSWER_CHARS
ERROR_BODY_BYTES = 64 * 1024
IDENTITY = {"Accept-Encoding": "identity"}
TOO_LONG_HINT = (
    "Check the server, or a proxy in front of it: klaw reads at most "
    f"{MAX_BODY_BYTES // 1_000_000} MB of an answer, counted unpacked if it came compressed (a longer one is a server"
    " writing without end), and undoes gzip and deflate only."
)

Refusal = Callable[[str], LlmError]


def answer_chars(content: str | None, arguments: Iterable[str | None]) -> int:
    """How many characters an answer (or a piece of one) holds: its text and its tool calls' arguments."""
    return len(content or "") + sum(len(part or "") for part in arguments)


def too_long(limit: int, model_id: str, base_url: str | None, counted: str = "") -> LlmMalformedResponseError:
    """The refusal of an answer past `limit` (`MAX_ANSWER_CHARS`) characters, in the same words whichever
    model wrote it: a server's (openai_client) or the program's own (`FunctionModel`, a `ChatModel`;
    engine/tool_loop.py)."""
    return LlmMalformedResponseError(
        f"the model's answer passed {limit:,} characters without ending{counted}; klaw stopped reading it",
        model_id=model_id,
        base_url=base_url,
        hint="A model that does not stop: set a lower max_tokens for it on its server, or ask for a shorter answer.",
    )


class _CappedBody(httpx.AsyncByteStream):
    """An answer's bytes as they come, unpacked if they came compressed, failing past `MAX_BODY_BYTES` in all
    (a whole body) or in one line (a stream of server-sent events). The line count is a C-level search of
    each network read (or unpacked piece), not of each chunk of the answer."""

    def __init__(self, inner: httpx.AsyncByteStream, refuse: Refusal, *, lines: bool, applied: list[str]) -> None:
        self._inner = inner
        self._refuse = refuse
        self._lines = lines
        self._applied = applied

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0  # since the last line break in a stream; in all otherwise
        lines = self._lines
        try:
            async for chunk in unpacked(self._inner, self._applied):  # the stream itself when uncompressed
                if lines and (newline := max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))) >= 0:
                    read = len(chunk) - newline - 1
                else:
                    read += len(chunk)
                if read > MAX_BODY_BYTES:
                    what = "one line of its stream" if lines else "its answer"
                    raise self._refuse(
                        f"{what} passed {MAX_BODY_BYTES // 1_000_000} MB without ending; klaw stopped reading it"
                    )
                yield chunk
        except CodingError as exc:  # corrupt compressed data
            raise self._refuse(str(exc)) from None

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped(response: httpx.Response, refuse: Refusal) -> None:
    """Put the counting (and unpacking) stream under a successful `response` whose body is not yet read;
    refuse it at once if it comes in a compression klaw does not undo (module docstring)."""
    try:
        applied = codings(response.headers)
    except CodingError as exc:
        raise refuse(str(exc)) from None
    # unpacked here, bounded: httpx must not unpack again, each read whole (it reads this header lazily)
    if applied:
        del response.headers["content-encoding"]
    assert isinstance(response.stream, httpx.AsyncByteStream)  # an AsyncClient's
    lines = "text/event-stream" in response.headers.get("content-type", "")
    response.stream = _CappedBody(response.stream, refuse, lines=lines, applied=applied)


async def excerpt(response: httpx.Response, limit: int = ERROR_BODY_BYTES) -> bytes:
    """The first `limit` bytes of a streamed response's body (an error status's: `ERROR_BODY_BYTES`), unpacked
    a piece at a time if compressed (nothing if in a coding klaw does not undo, or corrupt: only the status
    is shown then)."""
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in unpacked(response.aiter_raw(), codings(response.headers)):
            parts.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    except CodingError:
        return b""
    return b"".join(parts)[:limit]


def parsed(text: str | bytes, refuse: Refusal, what: str) -> Any:
    """`text` as JSON, or the worded refusal: not JSON, or nested deeper than Python's parser can go (its
    `RecursionError` is not a `ValueError`, and ended a turn as "something went wrong")."""
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise refuse(f"{what} was not valid JSON ({len(text)} bytes)") from exc
    except RecursionError:
        raise refuse(f"{what} was JSON nested too deep to read ({len(text):,} bytes)") from None
