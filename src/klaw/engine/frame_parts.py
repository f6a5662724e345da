"""A reply too large for one socket frame, as several `outbound` frames each under the limit.

A frame is one line of at most `MAX_FRAME_BYTES` (1 MiB) and a gateway must reject a longer one, so a
longer reply (a model asked to print a big file) used to be stored as answered and never delivered.
It now goes in parts, in order, each with the same `reply_to`: split between paragraphs where it can, else
between lines, else (one line over the limit) anywhere between characters. Joined again the parts are
exactly the text; each says which part of how many it is (the gateway joins them and shows the reply whole,
then confirms it: gateway/service.py, decision 443). The size that counts is the text as the frame's JSON
carries it (quotes, backslashes and control characters escaped), so each character is costed as it will be
encoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from json.encoder import encode_basestring  # json.dumps's own, as with ensure_ascii=False

from klaw.engine.frames import OutboundFrame

_BLOCK = 256  # characters costed together in a line over the budget (`_runs`)
_SPARE_BYTES = 64  # the newline and room for any difference in escaping between encoders


def outbound_parts(frame: OutboundFrame, max_bytes: int) -> list[OutboundFrame]:
    """`frame` itself if it fits, else its text in parts, each part's frame under `max_bytes`."""
    empty = len(frame.model_copy(update={"text": ""}).model_dump_json().encode())
    budget = max_bytes - empty - _SPARE_BYTES
    if _cost(frame.text) <= budget:
        return [frame]
    parts = split_text(frame.text, budget)
    return [frame.model_copy(update={"text": part, "part": n, "parts": len(parts)}) for n, part in enumerate(parts)]


def split_text(text: str, budget: int) -> list[str]:
    """`text` in consecutive parts of at most `budget` JSON-escaped bytes, cut at the widest boundary."""
    if budget < 16:
        raise ValueError("the budget is too small to carry any text")
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for piece, cost in _pieces(text, budget):
        if current and used + cost > budget:
            parts.append("".join(current))
            current, used = [], 0
        current.append(piece)
        used += cost
    if current:
        parts.append("".join(current))
    return parts


def _pieces(text: str, budget: int) -> Iterator[tuple[str, int]]:
    """Paragraphs; a paragraph over the budget as lines; a line over it as runs of characters."""
    for paragraph in _split_after(text, "\n\n"):
        cost = _cost(paragraph)
        if cost <= budget:
            yield paragraph, cost
            continue
        for line in _split_after(paragraph, "\n"):
            cost = _cost(line)
            if cost <= budget:
                yield line, cost
            else:
                yield from _runs(line, budget)


def _runs(line: str, budget: int) -> Iterator[tuple[str, int]]:
    """`line` in runs of at most `budget` bytes. Costed a block of characters at a time, and only the
    block that crosses the budget character by character: one encode per character made a 1.5 MB line
    take seconds on the engine's loop, stalling every other chat (decision 443); this is O(n) once."""
    start, used = 0, 0
    for block_start in range(0, len(line), _BLOCK):
        block = line[block_start : block_start + _BLOCK]
        cost = _cost(block)
        if used + cost <= budget:
            used += cost
            continue
        for index, char in enumerate(block, block_start):
            cost = _cost(char)
            if used + cost > budget:
                yield line[start:index], used
                start, used = index, 0
            used += cost
    if start < len(line):
        yield line[start:], used


def _split_after(text: str, mark: str) -> list[str]:
    """`text` cut after every occurrence of `mark`, overlapping ones too (as `re.split` on `(?<=mark)`,
    whose look-behind took 0.26 s for 3 MB on the engine's loop: decision 452)."""
    parts: list[str] = []
    start = 0
    at = text.find(mark)
    while at >= 0:
        end = at + len(mark)
        parts.append(text[start:end])
        start = end
        at = text.find(mark, end - len(mark) + 1)
    parts.append(text[start:])
    return parts


def _cost(text: str) -> int:
    """Bytes of `text` inside a JSON string (without its quotes), escaped as `json.dumps(…, ensure_ascii=False)`
    does, by its string encoder alone (`json.dumps`'s own steps around it were most of a 3 MB line's 0.8 s)."""
    return len(encode_basestring(text).encode("utf-8", "surrogatepass")) - 2
