"""Which past segments, exchanges and messages the past-conversations block holds, for `/context` and the web
Inspector (newcomer16, decision 445): by id with their first words and tokens."""

from __future__ import annotations

from collections.abc import Sequence

from klaw.llm.tokens import approximate_token_count
from klaw.memory.past_conversations.pipeline import ShownSegment

PART_WORDS_CHARS = 60


def recalled_parts(shown: Sequence[ShownSegment]) -> tuple[tuple[str, int], ...]:
    """Which past segments, exchanges and messages the past-conversations block holds, by id with their first
    words and tokens: `/context` and the web Inspector named only "1 item(s)", so a person could not see what
    was recalled (newcomer16, decision 445). The person's own chat, shown to them; kept in memory, never logged."""
    parts: list[tuple[str, int]] = []
    for segment in shown:
        text = segment.hit.summary.text
        parts.append((f"segment {segment.segment_id}: {_first_words(text)}", approximate_token_count(text)))
        for exchange in segment.exchanges:
            said = exchange.hit.summary.text
            parts.append((f"  exchange {exchange.exchange_id}: {_first_words(said)}", approximate_token_count(said)))
        for hit in segment.messages:
            content = hit.message.content
            parts.append((f"  message {hit.message.rowid}: {_first_words(content)}", approximate_token_count(content)))
    return tuple(parts)


def _first_words(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= PART_WORDS_CHARS else line[: PART_WORDS_CHARS - 1].rstrip() + "…"
