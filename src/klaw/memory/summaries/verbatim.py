"""The summary kept when the model gives none: the item's own words, made by a rule and kept for good.

An exchange the model answers with no text (a final answer, asked once), keeps rejecting (a bad
request or a malformed answer, `MAX_ATTEMPTS` times) or keeps timing out on while it answers others
(`MAX_TIMEOUTS` times, decision 261), still gets an exchange summary: the person's
words and the reply quoted, clipped. A segment whose fold the model keeps rejecting gets its summary
so far followed by the new exchange summaries, clipped. Both are logged like any summary, under the
model id `VERBATIM_MODEL`, so the give-up is remembered: the next start (and `klaw reindex`) finds a
summary and asks no more, and the segment fold and past conversations go on as with any other.
docs/decisions/250-summary-give-ups-and-mcp-waits.md says why a quote rather than a remembered refusal.
"""

from __future__ import annotations

from collections.abc import Sequence

from klaw.memory.summaries.prompts import MAX_EXCHANGE_CHARS, MAX_SEGMENT_CHARS, Transcript, clean_summary, clip
from klaw.store.summaries.records import Summary

VERBATIM_MODEL = "klaw/verbatim"
_QUOTE_TOKENS = 100


def verbatim_exchange(transcript: Transcript) -> str:
    """The exchange in its own words: what the person wrote, the tools used, the reply (each clipped)."""
    parts: list[str] = []
    if transcript.question:
        parts.append(f'The person wrote "{clip(" ".join(transcript.question.split()), _QUOTE_TOKENS)}"')
    if transcript.tools:
        parts.append(f"the assistant used {', '.join(transcript.tools)}")
    if transcript.reply:
        parts.append(f'the assistant replied "{clip(" ".join(transcript.reply.split()), _QUOTE_TOKENS)}"')
    text = "; ".join(parts) + "."
    return clean_summary(text[0].upper() + text[1:], MAX_EXCHANGE_CHARS)


def verbatim_segment(previous: Summary | None, new: Sequence[Summary]) -> str:
    """The summary so far followed by the new exchange summaries, at most `MAX_SEGMENT_CHARS`."""
    texts = ([previous.text] if previous is not None else []) + [s.text for s in new]
    return clean_summary(" ".join(texts), MAX_SEGMENT_CHARS)
