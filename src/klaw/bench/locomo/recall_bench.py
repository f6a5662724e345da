"""`klaw bench recall`: what the recall layers would actually put in a turn's context, on LoCoMo.

`klaw bench locomo` measures the raw search (top 5, 10, … over the whole conversation). A person
sees something else: the gate, `autoRag.topK`, `autoRag.maxTokens` and the sliding window decide
what reaches the model. This bench asks each LoCoMo question as the new message of a live turn at
the end of the conversation and records what the blocks would hold:

- auto-RAG (`AutoRagService.recall`, the product's service with the settings in force): all
  sessions in one segment, as `bench locomo` stores them; the last `context.slidingWindow`
  messages are the window (excluded from recall, and already in the context);
- past conversations (`PastConversationRetriever`, settings in force): each LoCoMo session a
  segment of its own, closed by `/new`, with its turns as messages, LoCoMo's session summary as
  the segment's final summary and its observation sentences as exchange summaries (a turn and
  the reply after it); the question is asked in a new segment after the last.

Figures per question (`recall_figures.py`): "context recall", the share of its evidence turns the
context holds (block or window), and whether the block injected anything. The negative set is
messages for which anything injected is noise: chit-chat, and the questions of another conversation
of the file (the next one). False injection is the share of those that inject anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Final

from klaw.bench.locomo.annotations import SessionNotes
from klaw.bench.locomo.dataset import Conversation, LocomoDataset
from klaw.bench.locomo.past_sessions import CHITCHAT
from klaw.bench.locomo.past_sessions_chat import exchange_position, exchange_texts
from klaw.bench.locomo.runner import CHANNEL, LocomoRunError, conversation_records, ingest_conversation
from klaw.bench.locomo.workbench import Workbench
from klaw.config import AutoRagConfig, RagConfig, SearchConfig
from klaw.engine.clock import SystemClock
from klaw.llm.tokens import approximate_token_count
from klaw.memory.auto_rag import AutoRagService, format_block
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.ingestion import Ingestion
from klaw.memory.past_conversations.retriever import PastConversationRetriever
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.store.sqlite.store import SqliteStore

LAYERS: Final = ("auto_rag", "past")
SUMMARY_MODEL = "locomo-annotation"


@dataclass(frozen=True, slots=True)
class RecallSettings:
    layers: tuple[str, ...] = LAYERS
    auto_rag: AutoRagConfig = field(default_factory=AutoRagConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    rag: RagConfig = field(default_factory=RagConfig)
    sliding_window: int = 20
    batch_size: int = 64

    def __post_init__(self) -> None:
        if not self.layers or any(layer not in LAYERS for layer in self.layers):
            raise ValueError(f"layers must be a non-empty subset of {', '.join(LAYERS)}; got {self.layers}")


@dataclass(frozen=True, slots=True)
class Asked:
    """One message asked as a turn, and what the layer's block held for it.

    `kind` is "question" (LoCoMo QA, `category` 1–5), "chit-chat" or "other conversation" (the
    negatives). For questions, `evidence` are its turns, `in_window` and `in_block` those the window
    and the block hold; `in_session` those whose session (segment) the block names."""

    layer: str
    sample_id: str
    kind: str
    text: str
    category: int | None
    evidence: tuple[str, ...]
    in_window: tuple[str, ...]
    in_block: tuple[str, ...]
    in_session: tuple[str, ...]
    injected: bool
    block_tokens: int


@dataclass(frozen=True, slots=True)
class RecallRun:
    dataset: LocomoDataset
    settings: RecallSettings
    embedder_id: str
    asked: list[Asked]


def negatives(dataset: LocomoDataset, conversation: Conversation) -> list[tuple[str, str]]:
    """(kind, text) of the messages that should inject nothing: chit-chat, and the next conversation's
    questions of categories 1–4 (none when the file holds one conversation)."""
    found = [("chit-chat", text) for text in CHITCHAT]
    others = dataset.conversations
    if len(others) > 1:
        other = others[(others.index(conversation) + 1) % len(others)]
        found += [("other conversation", q.text) for q in other.questions if q.category in (1, 2, 3, 4)]
    return found


async def run_recall(
    dataset: LocomoDataset, notes: dict[str, SessionNotes], bench: Workbench, settings: RecallSettings | None = None
) -> RecallRun:
    """Ask every question and negative of `dataset` in each layer; one stage, "asking"."""
    settings = settings or RecallSettings()
    embedder = bench.embedder
    asked: list[Asked] = []
    per_conversation = {c.sample_id: len(c.questions) + len(negatives(dataset, c)) for c in dataset.conversations}
    total = sum(per_conversation.values()) * len(settings.layers)
    for position, conversation in enumerate(dataset.conversations):
        for layer in settings.layers:
            directory = bench.work_dir / f"{position:03d}-{layer}"
            directory.mkdir(parents=True)
            store = await SqliteStore.open(directory / "klaw.db")
            try:
                if layer == "auto_rag":
                    found = await _auto_rag(store, embedder, directory, dataset, conversation, settings)
                else:
                    found = await _past(store, embedder, directory, dataset, conversation, notes, settings)
            finally:
                await store.aclose()
            asked += found
            bench.progress("asking", len(asked), total)
    return RecallRun(dataset, settings, embedder.model_id, asked)


Ask = Callable[[str, str, int | None, tuple[str, ...]], Awaitable[Asked]]


async def _ask_all(ask: Ask, dataset: LocomoDataset, conversation: Conversation) -> list[Asked]:
    """(kind, text, category, evidence) of every question of the conversation, then of its negatives."""
    found = [await ask("question", q.text, q.category, q.evidence) for q in conversation.questions]
    found += [await ask(kind, text, None, ()) for kind, text in negatives(dataset, conversation)]
    return found


async def _auto_rag(
    store: SqliteStore,
    embedder: Embedder,
    directory: Path,
    dataset: LocomoDataset,
    conversation: Conversation,
    settings: RecallSettings,
) -> list[Asked]:
    records = conversation_records(conversation)
    segment_id, dia_of = await ingest_conversation(
        store, embedder, directory, records, settings.auto_rag.min_message_tokens, settings.batch_size
    )
    chat = ChatRef(CHANNEL, conversation.sample_id)
    window = await store.messages.window(segment_id, settings.sliding_window)
    window_rowids = frozenset(m.rowid for m in window)
    window_dia = {dia_of[m.record.id] for m in window}
    service = AutoRagService(settings.auto_rag, HybridSearch(store, embedder, settings.search))
    session_of = conversation.session_of()

    async def ask(kind: str, text: str, category: int | None, evidence: tuple[str, ...]) -> Asked:
        recalled = await service.recall(chat, segment_id, text, window_rowids)
        shown = {dia_of[r.hit.message.record.id] for r in recalled}
        sessions = {session_of[d] for d in shown}
        tokens = approximate_token_count(format_block(recalled)) if recalled else 0
        return Asked(
            "auto_rag",
            conversation.sample_id,
            kind,
            text,
            category,
            evidence,
            tuple(d for d in evidence if d in window_dia),
            tuple(d for d in evidence if d in shown),
            tuple(d for d in evidence if session_of[d] in sessions),
            bool(recalled),
            tokens,
        )

    return await _ask_all(ask, dataset, conversation)


async def _past(
    store: SqliteStore,
    embedder: Embedder,
    directory: Path,
    dataset: LocomoDataset,
    conversation: Conversation,
    notes: dict[str, SessionNotes],
    settings: RecallSettings,
) -> list[Asked]:
    chat, sessions, exchanges, dia_of = await _sessions_as_segments(
        store, embedder, directory, conversation, notes[conversation.sample_id], settings
    )
    current = (await store.segments.current(chat)).id
    retriever = PastConversationRetriever(
        store,
        embedder,
        lambda: settings.rag,
        search=settings.search,
        max_message_distance=settings.auto_rag.relevance_threshold,
    )
    position_of = exchange_position(conversation)
    session_of = conversation.session_of()

    async def ask(kind: str, text: str, category: int | None, evidence: tuple[str, ...]) -> Asked:
        found = await retriever.retrieve(chat, current, text, settings.rag.max_tokens)
        shown_sessions: set[int] = set()
        shown_exchanges: set[tuple[int, int]] = set()
        shown_turns: set[str] = set()
        block = found.block if found is not None else None
        if found is not None and block:
            for segment in found.shown:
                shown_sessions.add(sessions[segment.segment_id])
                shown_exchanges.update(exchanges[e.exchange_id] for e in segment.exchanges)
                shown_turns.update(dia_of[m.message.rowid] for m in segment.messages if m.message.rowid in dia_of)
        return Asked(
            "past",
            conversation.sample_id,
            kind,
            text,
            category,
            evidence,
            (),
            tuple(d for d in evidence if position_of[d] in shown_exchanges or d in shown_turns),
            tuple(d for d in evidence if session_of[d] in shown_sessions),
            bool(block),
            approximate_token_count(block) if block else 0,
        )

    return await _ask_all(ask, dataset, conversation)


async def _sessions_as_segments(
    store: SqliteStore,
    embedder: Embedder,
    directory: Path,
    conversation: Conversation,
    notes: SessionNotes,
    settings: RecallSettings,
) -> tuple[ChatRef, dict[int, int], dict[int, tuple[int, int]], dict[int, str]]:
    """Each session a segment (messages through `Ingestion`, exchanges with their summaries, the
    final segment summary, then `/new`), everything embedded by the queue. Returns the chat,
    segment id → session, exchange id → (session, position) and message rowid → turn id."""
    chat = ChatRef(CHANNEL, conversation.sample_id)
    await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
    await store.summaries.bind_embedder(embedder.model_id, embedder.dim)
    ingestion = Ingestion(
        ConversationLog(directory / "conversations"), store, min_embed_tokens=settings.auto_rag.min_message_tokens
    )
    sessions: dict[int, int] = {}
    exchanges: dict[int, tuple[int, int]] = {}
    dia_of: dict[int, str] = {}
    for session in conversation.sessions:
        segment = await store.segments.current(chat)
        sessions[segment.id] = session.number
        moment = session.started_at
        rowids: list[int] = []
        for offset, turn in enumerate(session.turns):
            record = MessageRecord(chat, Role.USER, turn.message_text, created_at=moment + timedelta(seconds=offset))
            stored = await ingestion.accept(record)
            dia_of[stored.rowid] = turn.dia_id
            rowids.append(stored.rowid)
        moment += timedelta(seconds=len(session.turns))
        texts = exchange_texts(session, notes, "facts")
        for position, text in enumerate(texts):
            exchange = await store.exchanges.open(chat, segment.id, rowids[2 * position], moment)
            await store.exchanges.close(exchange.id, ExchangeStatus.COMPLETED, None, moment)
            exchanges[exchange.id] = (session.number, position)
            if text is not None:
                await store.summaries.save_exchange_summary(exchange, text, SUMMARY_MODEL, moment)
        summary = notes.summaries.get(session.number)
        if summary is not None:
            await store.summaries.save_segment_summary(
                segment.id,
                summary,
                SUMMARY_MODEL,
                final=True,
                covers_exchange_id=None,
                exchanges_covered=len(texts),
                at=moment,
            )
        await ingestion.accept(MessageRecord(chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=moment))
    await EmbeddingQueue(store, embedder, SystemClock(), batch_size=settings.batch_size).run_until_idle()
    counts = await store.embedding_jobs.counts()
    if counts.pending or counts.failed:
        raise LocomoRunError(f"{counts.pending + counts.failed} embedding(s) did not complete; figures would be wrong")
    return chat, sessions, exchanges, dia_of


def summarised(asked: Sequence[Asked]) -> dict[str, object]:
    """Means over the questions and negatives given (see `recall_report` for the grouping)."""
    questions = [a for a in asked if a.kind == "question" and a.evidence]
    negative = [a for a in asked if a.kind != "question"]

    def share(values: Sequence[bool]) -> float:
        return 100.0 * sum(values) / len(values) if values else 0.0

    def mean(values: Sequence[float]) -> float:
        return 100.0 * sum(values) / len(values) if values else 0.0

    return {
        "questions": len(questions),
        "context_recall": mean([len(set(a.in_window) | set(a.in_block)) / len(a.evidence) for a in questions]),
        "block_recall": mean([len(a.in_block) / len(a.evidence) for a in questions]),
        "any_evidence_in_context": share([bool(a.in_window or a.in_block) for a in questions]),
        "session_named": mean([len(a.in_session) / len(a.evidence) for a in questions]),
        "injected": share([a.injected for a in questions]),
        "block_tokens": sum(a.block_tokens for a in questions) / len(questions) if questions else 0.0,
        "negatives": len(negative),
        "false_injection": share([a.injected for a in negative]),
    }
