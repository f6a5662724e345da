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
empty chunks). klaw asks for answers uncompressed (`IDENTITY`): the count is of the bytes received, and a
compressed body unpacks to far more; one compressed anyway is refused at its first bytes.

An error status's body is read at most `ERROR_BODY_BYTES` (`excerpt`): only a 300-character excerpt of the
server's message is ever shown.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from klaw.llm.errors import LlmError

# ~500,000 tokens: above any model's output limit, and above a reply the engine's socket must still carry
# in parts (tests/engine/test_turn_failures.py sends 1.8 million characters).
MAX_ANSWER_CHARS = 2_000_000
# An answer of MAX_ANSWER_CHARS characters each written as a 6-byte `\uXXXX` escape, with room for the JSON
# around it; also 100 embeddings of 4,096 dimensions (~9 MB), the largest batch the embedder asks for.
MAX_BODY_BYTES = 8 * MAX_ANSWER_CHARS
ERROR_BODY_BYTES = 64 * 1024
IDENTITY = {"Accept-Encoding": "identity"}
TOO_LONG_HINT = (
    "Check the server, or a proxy in front of it: klaw reads an answer uncompressed and at most "
    f"{MAX_BODY_BYTES // 1_000_000} MB (a longer one is a server writing without end)."
)

Refusal = Callable[[str], LlmError]


class _CappedBody(httpx.AsyncByteStream):
    """An answer's bytes as they come, failing past `MAX_BODY_BYTES` in all (a whole body) or in one line
    (a stream of server-sent events). The line count is a C-level search of each network read, not of each
    chunk of the answer."""

    def __init__(self, inner: httpx.AsyncByteStream, refuse: Refusal, *, lines: bool) -> None:
        self._inner = inner
        self._refuse = refuse
        self._lines = lines

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0  # since the last line break in a stream; in all otherwise
        lines = self._lines
        async for chunk in self._inner:
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

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped(response: httpx.Response, refuse: Refusal) -> None:
    """Put the counting stream under a successful `response` whose body is not yet read; refuse it at once
    if it comes compressed (module docstring)."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise refuse(f"it sent its answer compressed ({encoding[:20]}) although klaw asked for it uncompressed")
    assert isinstance(response.stream, httpx.AsyncByteStream)  # an AsyncClient's
    lines = "text/event-stream" in response.headers.get("content-type", "")
    response.stream = _CappedBody(response.stream, refuse, lines=lines)


async def excerpt(response: httpx.Response) -> bytes:
    """The first `ERROR_BODY_BYTES` of an error status's body (unpacked only if uncompressed: a compressed
    one gives nothing, its message is not worth unpacking an unbounded body for)."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        return b""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        parts.append(chunk)
        size += len(chunk)
        if size >= ERROR_BODY_BYTES:
            break
    return b"".join(parts)[:ERROR_BODY_BYTES]


def parsed(text: str | bytes, refuse: Refusal, what: str) -> Any:
    """`text` as JSON, or the worded refusal: not JSON, or nested deeper than Python's parser can go (its
    `RecursionError` is not a `ValueError`, and ended a turn as "something went wrong")."""
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise refuse(f"{what} was not valid JSON ({len(text)} bytes)") from exc
    except RecursionError:
        raise refuse(f"{what} was JSON nested too deep to read ({len(text):,} bytes)") from None
