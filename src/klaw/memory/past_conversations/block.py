"""The past-conversations block as the model reads it, within its token budget.

    Related past conversations of this chat (most similar first). fetch_conversation_details with a
    segment_id or exchange_id gives the full transcript:
    - segment 12 (2026-01-03, similarity 0.82): Planned a trip to Lisbon …
      - said 2026-01-03 14:07 UTC: [user] we fly on the 14th and stay in Alfama
      - exchange 57 (2026-01-03 14:05 UTC, similarity 0.79): Asked for hotels near Alfama …
    - segment 9 (2025-12-20, found by its messages): Talked about music lessons …
      - said 2025-12-20 18:31 UTC: [user] I finally bought a cello

Ids, dates and similarities are there so the model can judge relevance and drill down. Messages
found directly (`past_messages.py`) come under their segment before its exchanges, and a segment
shown for its messages has its summary cut to `SUMMARY_WITH_MESSAGES_TOKENS`: the messages are the
evidence, the summary only says what the conversation was about. A message that is the reply to a
question which lent it its score (`HybridHit.asked`) has that question on the line before it, fitted
after the reply (the reply is the hit) and shortened to its end, where it asks, when room is short. Lines are
taken best first while they fit; a line that does not fit is shortened to the room left (at least
`MIN_LINE_TOKENS`), after which the block is full; a segment that no longer fits ends the block (its
exchanges would hang without it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

from klaw.llm.tokens import approximate_token_count
from klaw.memory.hybrid_search import HybridHit
from klaw.memory.past_conversations.pipeline import ShownExchange, ShownSegment
from klaw.memory.summaries.prompts import clip

HEADER = (
    "Related past conversations of this chat (most similar first). fetch_conversation_details with a"
    " segment_id or exchange_id gives the full transcript:"
)
MIN_LINE_TOKENS = 24
SUMMARY_WITH_MESSAGES_TOKENS = 60
_HEADER_TOKENS = approximate_token_count(HEADER) + 1


def segment_line(segment: ShownSegment, text: str | None = None) -> str:
    day = _date(segment.started_at, "%Y-%m-%d")
    similarity = "found by its messages" if segment.by_messages else f"similarity {segment.hit.similarity:.2f}"
    return f"- segment {segment.segment_id} ({day}, {similarity}): {text or segment.hit.summary.text}"


def message_line(message: HybridHit, text: str | None = None) -> str:
    record = message.message.record
    when = record.created_at.strftime("%Y-%m-%d %H:%M UTC")
    return f"  - said {when}: [{record.role.value}] {text or message.message.content}"


def exchange_line(exchange: ShownExchange, text: str | None = None) -> str:
    when = _date(exchange.started_at, "%Y-%m-%d %H:%M UTC")
    return (
        f"  - exchange {exchange.exchange_id} ({when}, similarity {exchange.hit.similarity:.2f}):"
        f" {text or exchange.hit.summary.text}"
    )


def fit_block(segments: Sequence[ShownSegment], max_tokens: int) -> tuple[str | None, tuple[ShownSegment, ...]]:
    """The block and what it shows (exchanges cut to those that fit); (None, ()) when nothing fits."""
    room = max_tokens - _HEADER_TOKENS
    lines: list[str] = []
    shown: list[ShownSegment] = []
    full = False
    for segment in segments:
        summary = segment.hit.summary.text
        if segment.messages and approximate_token_count(summary) > SUMMARY_WITH_MESSAGES_TOKENS:
            summary = clip(summary, SUMMARY_WITH_MESSAGES_TOKENS)
        line, room, full = _fit(summary, room, partial(segment_line, segment))
        if line is None:
            break
        lines.append(line)
        said: list[HybridHit] = []
        for message in segment.messages:
            if full:
                break
            fitted, room, full = _fit(message.message.content, room, partial(message_line, message))
            if fitted is None:
                continue
            question = message.asked
            if not full and question is not None and all(s.message.rowid != question.message.rowid for s in said):
                asked, room, full = _fit(question.message.content, room, partial(message_line, question), from_end=True)
                if asked is not None:
                    lines.append(asked)
                    said.append(question)
            lines.append(fitted)
            said.append(message)
        kept: list[ShownExchange] = []
        for exchange in segment.exchanges:
            if full:
                break
            fitted, room, full = _fit(exchange.hit.summary.text, room, partial(exchange_line, exchange))
            if fitted is None:
                continue
            lines.append(fitted)
            kept.append(exchange)
        shown.append(
            ShownSegment(segment.hit, segment.started_at, tuple(kept), tuple(said), by_messages=segment.by_messages)
        )
        if full:
            break
    if not lines:
        return None, ()
    return HEADER + "\n" + "\n".join(lines), tuple(shown)


def _fit(text: str, room: int, render: Callable[[str], str], *, from_end: bool = False) -> tuple[str | None, int, bool]:
    """(the line, or its shortened form, or None; room left; block now full). Each line costs its
    tokens plus one for its line break. `from_end` shortens a question to its end, where it asks."""
    line = render(text)
    cost = approximate_token_count(line) + 1
    if cost <= room:
        return line, room - cost, False
    frame = approximate_token_count(line) - approximate_token_count(text)
    if room - frame - 1 < MIN_LINE_TOKENS:
        return None, room, False
    return render(clip(text, room - frame - 2, from_end=from_end)), 0, True


def _date(moment: datetime | None, pattern: str) -> str:
    return moment.strftime(pattern) if moment is not None else "date unknown"
