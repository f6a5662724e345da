"""A LoCoMo conversation as a chat of past segments with summaries, written the product's way.

Every session that has a `session_summary` becomes a segment closed by a `/new` record, with that
summary as its final segment summary. Its turns are paired into exchanges (a turn and the reply after
it), each with an exchange summary chosen by `exchange_text`:

- `turns`: the two turns verbatim (`"<speaker>: <text>"`, one per line), a stand-in for a summary
  that keeps every word said;
- `facts`: LoCoMo's `observation` sentences about those two turns, written by a model in the third
  person like klaw's exchange summaries; an exchange without any has no summary (as if the
  summarizer had not reached it).

With `names` "neutral", the two speakers' names are replaced everywhere (summaries, exchange texts,
questions) by "the person" (the first to speak) and "the assistant": in klaw a message rarely names
its writer and summaries speak of "the person", while LoCoMo's questions and summaries name the same
people, which makes every one of its texts more alike than klaw's would be.

Summaries are written through the summaries repository (which queues their embeddings in the same
transaction) and embedded by the durable `EmbeddingQueue`, as in the product. The store's clock is
the wall clock: only the sessions' dates are dated from the data.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from klaw.bench.locomo.annotations import SessionNotes
from klaw.bench.locomo.dataset import Conversation, Session
from klaw.engine.clock import SystemClock
from klaw.errors import KlawError
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.store.sqlite.store import SqliteStore

CHANNEL = "locomo"
SUMMARY_MODEL = "locomo-annotation"
EXCHANGE_TEXTS: Final = ("turns", "facts")
NAMES: Final = ("kept", "neutral")
NEUTRAL_NAMES: Final = ("the person", "the assistant")

Rename = Callable[[str], str]


class PastSessionsRunError(KlawError, RuntimeError):
    """The run cannot produce honest figures (a summary not stored, embeddings or retrieval failed)."""


def renamer(conversation: Conversation, names: str) -> Rename:
    """The text as the bench stores or asks it: unchanged, or with the speakers' names made neutral."""
    if names == "kept":
        return lambda text: text
    speakers = list(dict.fromkeys(turn.speaker for turn in conversation.turns))
    neutral = {name: NEUTRAL_NAMES[min(i, 1)] for i, name in enumerate(speakers)}
    pattern = re.compile(r"\b(" + "|".join(re.escape(name) for name in speakers) + r")\b")
    return lambda text: pattern.sub(lambda match: neutral[match.group(1)], text)


def exchange_texts(
    session: Session, notes: SessionNotes, exchange_text: str, rename: Rename = lambda text: text
) -> list[str | None]:
    """The summary of each exchange of `session` (a turn and the reply after it), None when it has none."""
    pairs = [session.turns[start : start + 2] for start in range(0, len(session.turns), 2)]
    if exchange_text == "turns":
        return [rename("\n".join(turn.message_text for turn in pair)) for pair in pairs]
    facts = notes.facts.get(session.number, ())
    joined = [" ".join(f.text for f in facts if f.dia_id in {turn.dia_id for turn in pair}) for pair in pairs]
    return [rename(text) if text else None for text in joined]


def exchange_position(conversation: Conversation) -> dict[str, tuple[int, int]]:
    """Turn id → (session number, position of its exchange in the session)."""
    return {
        turn.dia_id: (session.number, offset // 2)
        for session in conversation.sessions
        for offset, turn in enumerate(session.turns)
    }


def summary_count(conversation: Conversation, notes: SessionNotes, exchange_text: str) -> int:
    """The summaries `build_chat` writes: each session's with a summary, and its exchanges' that have a text."""
    return sum(
        1 + sum(1 for text in exchange_texts(session, notes, exchange_text) if text is not None)
        for session in conversation.sessions
        if session.number in notes.summaries
    )


@dataclass(frozen=True, slots=True)
class PastChat:
    """A conversation stored as a chat of past segments: what the queries need to name what they find."""

    ref: ChatRef
    current_segment_id: int
    sessions: dict[int, int]  # segment id → session number (sessions with a summary)
    exchanges: dict[int, tuple[int, int]]  # exchange id → (session number, position)
    exchange_summaries: int
    longest_session: int  # most exchanges in one session


async def build_chat(
    store: SqliteStore,
    embedder: Embedder,
    conversation: Conversation,
    notes: SessionNotes,
    exchange_text: str,
    rename: Rename,
    advance: Callable[[str, int], None],
) -> PastChat:
    """Each session with a summary as a closed segment with its exchanges and summaries (embeddings queued)."""
    ref = ChatRef(CHANNEL, conversation.sample_id)
    await store.summaries.bind_embedder(embedder.model_id, embedder.dim)
    sessions: dict[int, int] = {}
    exchanges: dict[int, tuple[int, int]] = {}
    written = longest = 0
    for session in conversation.sessions:
        summary = notes.summaries.get(session.number)
        if summary is None:
            continue
        segment = await store.segments.current(ref)
        moment = session.started_at
        texts = exchange_texts(session, notes, exchange_text, rename)
        for position, text in enumerate(texts):
            exchange = await store.exchanges.open(ref, segment.id, None, moment)
            await store.exchanges.close(exchange.id, ExchangeStatus.COMPLETED, None, moment)
            exchanges[exchange.id] = (session.number, position)
            if text is not None:
                if await store.summaries.save_exchange_summary(exchange, text, SUMMARY_MODEL, moment) is None:
                    raise PastSessionsRunError(f"an exchange summary of session {session.number} was not stored")
                written += 1
            moment += timedelta(seconds=2)
        final = await store.summaries.save_segment_summary(
            segment.id,
            rename(summary),
            SUMMARY_MODEL,
            final=True,
            covers_exchange_id=None,
            exchanges_covered=len(texts),
            at=moment,
        )
        if final is None:
            raise PastSessionsRunError(f"the summary of session {session.number} was not stored")
        sessions[segment.id] = session.number
        longest = max(longest, len(texts))
        await store.messages.append(
            MessageRecord(ref, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=moment)
        )
        advance("storing summaries", 1 + sum(1 for text in texts if text is not None))
    current = await store.segments.current(ref)
    return PastChat(ref, current.id, sessions, exchanges, written, longest)


async def embed_summaries(
    store: SqliteStore, embedder: Embedder, batch_size: int, advance: Callable[[str, int], None]
) -> None:
    queue = EmbeddingQueue(store, embedder, SystemClock(), batch_size=batch_size)
    reported = 0

    def embedding_progress(embedded: int, _total: int) -> None:
        nonlocal reported
        advance("embedding summaries", embedded - reported)
        reported = embedded

    await queue.run_until_idle(embedding_progress)
    counts = await store.embedding_jobs.counts()
    if counts.pending or counts.failed:
        raise PastSessionsRunError(
            f"{counts.pending + counts.failed} summary embedding(s) did not complete (see the log for the error);"
            " the figures would be wrong"
        )
