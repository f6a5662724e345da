"""What the summarization model is asked, and what is kept of its answer.

Inputs are clipped to a token budget (`summarizer.maxInputTokens`), so one enormous message cannot
make a request the model rejects; answers are cleaned (a "Summary:" label dropped, whitespace
collapsed, length capped). An empty answer is an error (`EmptySummaryError`): the item is tried again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from klaw.errors import KlawError
from klaw.llm.messages import ChatMessage
from klaw.llm.tokens import approximate_token_count
from klaw.store.records import MessageType, RecordKind, StoredMessage
from klaw.store.summaries.records import Summary

EXCHANGE_INSTRUCTIONS = (
    "You summarize one exchange between a person and their AI assistant, for the assistant's long-term"
    " memory. Write one or two sentences in the third person: what the person asked, what the assistant"
    " did (tools it used), and the outcome. Keep names, numbers, dates and decisions. Reply with the"
    " summary only, no preamble."
)
BATCH_INSTRUCTIONS = (
    "You summarize several exchanges between a person and their AI assistant, for the assistant's long-term"
    " memory. For each numbered exchange write one or two sentences in the third person: what the person"
    " asked, what the assistant did (tools it used), and the outcome. Keep names, numbers, dates and"
    " decisions. Reply with one line per exchange, in order, starting with its number and a period"
    ' ("1. The person asked …"), and nothing else.'
)
SEGMENT_INSTRUCTIONS = (
    "You keep the running summary of one conversation between a person and their AI assistant, for the"
    " assistant's long-term memory. Update the summary so far with the new exchanges: at most five"
    " sentences on the topics, facts, decisions and open questions, as they stand now. Keep names,"
    " numbers and dates. Reply with the summary only, no preamble."
)
EXCHANGE_ANSWER_TOKENS = 150
SEGMENT_ANSWER_TOKENS = 400
MAX_EXCHANGE_CHARS = 1000
MAX_SEGMENT_CHARS = 2500
ELLIPSIS = "…"
_LABEL = re.compile(r"^\s*(?:\*\*)?summary(?:\*\*)?\s*:\s*", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*(?:\*\*)?(?:exchange\s+)?(\d+)(?:\*\*)?\s*[.):]\s*(?:\*\*)?\s*(.*)$", re.IGNORECASE)


class EmptySummaryError(KlawError, ValueError):
    """The model answered with no text."""


@dataclass(frozen=True, slots=True)
class Transcript:
    """What a summary is written from: the person's messages, the tools used, the final reply."""

    question: str
    tools: tuple[str, ...]
    reply: str

    @classmethod
    def of(cls, messages: Sequence[StoredMessage]) -> Transcript | None:
        """None when the exchange holds nothing to summarize (no question and no reply are stored,
        e.g. forgotten)."""
        asked = [m.content for m in messages if m.kind is RecordKind.USER_MESSAGE]
        replies = [m.content for m in messages if m.kind is RecordKind.REPLY]
        tools = tuple(sorted({name for m in messages for name in _tool_names(m)}))
        question, reply = "\n".join(asked).strip(), (replies[-1] if replies else "").strip()
        return cls(question, tools, reply) if question or reply else None

    @property
    def tokens(self) -> int:
        return approximate_token_count(self.question) + approximate_token_count(self.reply)

    def text(self, max_tokens: int) -> str:
        """The exchange as the summarizer reads it, within about `max_tokens` (half each side)."""
        half = max(max_tokens // 2, 1)
        parts = [f"The person wrote:\n{clip(self.question, half) or '(nothing)'}"]
        if self.tools:
            parts.append("Tools the assistant used: " + ", ".join(self.tools))
        parts.append(f"The assistant's final reply:\n{clip(self.reply, half) or '(none)'}")
        return "\n\n".join(parts)


def exchange_prompt(messages: Sequence[StoredMessage], max_input_tokens: int) -> list[ChatMessage] | None:
    """The request summarizing an exchange from its transcript; None when it holds nothing to summarize."""
    transcript = Transcript.of(messages)
    if transcript is None:
        return None
    return [ChatMessage.system(EXCHANGE_INSTRUCTIONS), ChatMessage.user(transcript.text(max_input_tokens))]


def batch_prompt(transcripts: Sequence[Transcript], max_input_tokens: int) -> list[ChatMessage]:
    """The request summarizing several exchanges at once, numbered from 1. Each is cut as it would be
    alone; `ExchangeSummarizer` batches only exchanges whose whole text fits `max_input_tokens` together."""
    parts = [f"### Exchange {n}\n{t.text(max_input_tokens)}" for n, t in enumerate(transcripts, start=1)]
    return [ChatMessage.system(BATCH_INSTRUCTIONS), ChatMessage.user("\n\n".join(parts))]


def numbered_answers(answer: str | None, count: int) -> dict[int, str]:
    """The lines of a batch answer by their number (1 … `count`); a line without a number continues
    the one before it. Numbers missing or out of range are simply absent: those exchanges are asked
    again alone."""
    found: dict[int, list[str]] = {}
    current: int | None = None
    for line in (answer or "").splitlines():
        match = _NUMBERED.match(line)
        if match is not None:
            number = int(match.group(1))
            current = number if 1 <= number <= count and number not in found else None
            if current is not None:
                found[current] = [match.group(2)]
        elif current is not None and line.strip():
            found[current].append(line.strip())
    return {n: " ".join(parts) for n, parts in found.items() if " ".join(parts).strip()}


def segment_prompt(previous: Summary | None, new: Sequence[Summary], max_input_tokens: int) -> list[ChatMessage]:
    """The request rolling a segment summary forward over `new` exchange summaries."""
    so_far = clip(previous.text, max_input_tokens // 3) if previous is not None else "(none yet)"
    room = max((max_input_tokens - approximate_token_count(so_far)) // max(len(new), 1), 16)
    lines = [f"{i}. {clip(s.text, room)}" for i, s in enumerate(new, start=1)]
    text = f"Summary so far:\n{so_far}\n\nNew exchanges, oldest first:\n" + "\n".join(lines)
    return [ChatMessage.system(SEGMENT_INSTRUCTIONS), ChatMessage.user(text)]


def clean_summary(answer: str | None, max_chars: int) -> str:
    """The model's answer as stored: label dropped, whitespace collapsed, at most `max_chars`."""
    text = " ".join(_LABEL.sub("", answer or "").split())
    if not text:
        raise EmptySummaryError("the summarization model answered with no text")
    if len(text) > max_chars:
        cut = text[: max_chars - 1]
        space = cut.rfind(" ")
        text = (cut[:space] if space > max_chars * 0.8 else cut).rstrip() + ELLIPSIS
    return text


def clip(text: str, max_tokens: int, *, from_end: bool = False) -> str:
    """The longest beginning of `text` within `max_tokens` (approximately), marked "…" when cut; with
    `from_end`, its longest end (where a question asks), "…" before it."""
    if approximate_token_count(text) <= max_tokens:
        return text

    def part(length: int) -> str:
        return text[len(text) - length :] if from_end else text[:length]

    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if approximate_token_count(part(middle)) + 1 <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return ELLIPSIS + part(low).lstrip() if from_end else part(low).rstrip() + ELLIPSIS


def _tool_names(message: StoredMessage) -> list[str]:
    if message.record.type is not MessageType.TOOL_CALL:
        return []
    calls = (message.record.metadata or {}).get("tool_calls", [])
    return [str(c["name"]) for c in calls if isinstance(c, dict) and c.get("name")] if isinstance(calls, list) else []
