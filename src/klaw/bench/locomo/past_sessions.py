"""`klaw bench past-sessions`: how similar a new message is to the summaries of the past segments that
hold its answer, through the product's past-conversation retrieval.

Why: retrieval of past conversations is gated by `rag.minSimilarity`; a gate the embedder's
similarities rarely reach shows nothing, one they always reach shows noise. This bench measures where
the gate sits for the configured embedder.

Each LoCoMo conversation becomes a chat of past segments (`past_sessions_chat.py`), once per way of
naming its speakers and per exchange text, in a fresh `SqliteStore`. The queries are asked in a new
segment after the last one, through `PastConversationRetriever` running the default stages (guard,
query embedding, similar segments, their exchanges; not the names stage: these chats hold no
messages, so every name would look unknown) with the gate open (below any cosine) and every
past segment asked for, so each query's whole ranking is known; the exchanges of its evidence
sessions are then ranked in full by the same `SimilarExchanges` stage. What a gate and the limits
would show is derived from the rankings in `past_sessions_figures.py` (the stages keep a prefix of
each ranking, so this is exact). Each query is also asked once with the `rag` settings in force, all
stages with the block included, to record what the product shows as configured.

Queries: the QA questions of categories 1–4 (`question`) and 5 (`adversarial`), whose evidence turns
name the sessions and exchanges that hold the answer; and two kinds of unrelated message, for which
anything shown is noise: the next conversation's questions (`other_conversation`) and chit-chat.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from klaw.bench.locomo.annotations import SessionNotes
from klaw.bench.locomo.dataset import Conversation, LocomoDataset, Question
from klaw.bench.locomo.past_sessions_chat import (
    EXCHANGE_TEXTS,
    NAMES,
    PastChat,
    PastSessionsRunError,
    Rename,
    build_chat,
    embed_summaries,
    exchange_position,
    renamer,
    summary_count,
)
from klaw.bench.locomo.workbench import Workbench
from klaw.config import RagConfig
from klaw.llm.tokens import approximate_token_count
from klaw.memory.embedder.memo import QueryMemo
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.past_conversations.pipeline import Retrieval
from klaw.memory.past_conversations.retriever import PastConversationRetriever, default_pipeline
from klaw.memory.past_conversations.stages import SimilarExchanges
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.records import SummaryHit

HEADLINE_CATEGORIES: Final = (1, 2, 3, 4)
ADVERSARIAL_CATEGORY: Final = 5
# Messages that relate to nothing said before (invented for the bench): a gate should show nothing.
CHITCHAT: Final = (
    "ok thanks",
    "good morning",
    "thank you!",
    "hi",
    "hello there",
    "how are you?",
    "lol",
    "sounds good",
    "see you tomorrow",
    "good night",
    "what time is it?",
    "can you help me with something?",
    "nice",
    "great, thanks a lot",
    "ok",
    "yes please",
    "no worries",
    "cool",
    "haha that's funny",
    "let's continue",
    "never mind",
    "got it",
    "bye for now",
    "are you there?",
)
_OPEN_GATE = -1.0  # below any cosine similarity: every past segment and exchange is kept


@dataclass(frozen=True, slots=True)
class PastRunSettings:
    exchange_texts: tuple[str, ...] = EXCHANGE_TEXTS
    names: tuple[str, ...] = NAMES
    batch_size: int = 64  # embedder.batchSize: texts per embedding call of the queue
    rag: RagConfig = field(default_factory=RagConfig)  # the `rag` section in force: its limits, and what it shows

    def __post_init__(self) -> None:
        for label, chosen, allowed in (
            ("exchange texts", self.exchange_texts, EXCHANGE_TEXTS),
            ("names", self.names, NAMES),
        ):
            if not chosen or any(value not in allowed for value in chosen):
                raise ValueError(f"{label} must be a non-empty subset of {', '.join(allowed)}; got {chosen}")

    @property
    def setups(self) -> list[tuple[str, str]]:
        """(names, exchange text) of each store built per conversation."""
        return [(names, text) for names in self.names for text in self.exchange_texts]


@dataclass(frozen=True, slots=True)
class EvidenceExchange:
    """The evidence exchange most similar to the query: its session, similarity and rank in its session."""

    session: int
    similarity: float
    rank: int
    others: tuple[float, ...]  # the similarities of the other exchanges of that session


@dataclass(frozen=True, slots=True)
class Asked:
    """One query's rankings, as the pipeline found them with the gate open."""

    sample_id: str
    kind: str  # question | adversarial | other_conversation | chitchat
    index: int  # qa position (of the conversation the question comes from), or chit-chat position
    category: int | None
    evidence_sessions: frozenset[int]
    segments: tuple[tuple[int, float], ...]  # every past session with a summary: (number, similarity), best first
    # per session, its top `exchange_limit_per_conversation` exchanges: (is evidence, similarity), best first
    exchanges: Mapping[int, tuple[tuple[bool, float], ...]]
    evidence_exchange: EvidenceExchange | None  # None: no exchange holding evidence has a summary
    # what the `rag` settings in force show (the block included): sessions, and whether each exchange is evidence
    shown_sessions: tuple[int, ...] = ()
    shown_exchanges: tuple[bool, ...] = ()
    block_tokens: int = 0


@dataclass(frozen=True, slots=True)
class PastRun:
    dataset: LocomoDataset
    settings: PastRunSettings
    embedder_id: str
    embedder_dim: int
    asked: dict[tuple[str, str], list[Asked]]  # by (names, exchange text)
    segments: int  # past segments with a summary, over all conversations
    exchange_summaries: dict[str, int]  # by exchange text
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class _Query:
    kind: str
    index: int
    text: str
    question: Question | None = None


async def run_past_sessions(
    dataset: LocomoDataset, notes: Mapping[str, SessionNotes], bench: Workbench, settings: PastRunSettings | None = None
) -> PastRun:
    """Measure every conversation of `dataset` with each exchange text; stages: "storing summaries",
    "embedding summaries" and "queries"."""
    settings = settings or PastRunSettings()
    embedder = bench.embedder
    started = time.perf_counter()
    conversations = dataset.conversations
    queries = {
        (c.sample_id, names): _queries(c, conversations, names) for c in conversations for names in settings.names
    }
    summaries = len(settings.names) * sum(
        summary_count(c, notes[c.sample_id], text) for c in conversations for text in settings.exchange_texts
    )
    totals = {
        "storing summaries": summaries,
        "embedding summaries": summaries,
        "queries": len(settings.exchange_texts) * sum(len(q) for q in queries.values()),
    }
    advance = bench.stages(totals)
    memo = QueryMemo(embedder, size=sum(len(q) for q in queries.values()) + 1)  # each query embedded once
    asked: dict[tuple[str, str], list[Asked]] = {setup: [] for setup in settings.setups}
    counts: dict[str, int] = dict.fromkeys(settings.exchange_texts, 0)
    segments = 0
    for position, conversation in enumerate(conversations):
        where = exchange_position(conversation)
        for names, exchange_text in settings.setups:
            directory = bench.work_dir / f"{position:03d}-{names}-{exchange_text}"
            directory.mkdir(parents=True, exist_ok=False)
            store = await SqliteStore.open(directory / "klaw.db")
            try:
                rename = renamer(conversation, names)
                chat = await build_chat(
                    store, embedder, conversation, notes[conversation.sample_id], exchange_text, rename, advance
                )
                if names == settings.names[0]:  # the same counts for every way of naming
                    counts[exchange_text] += chat.exchange_summaries
                    segments += len(chat.sessions) if exchange_text == settings.exchange_texts[0] else 0
                await embed_summaries(store, embedder, settings.batch_size, advance)
                ask = _Asker(store, memo, chat, where, settings.rag)
                for query in queries[conversation.sample_id, names]:
                    asked[names, exchange_text].append(await ask(conversation.sample_id, query))
                    advance("queries", 1)
            finally:
                await store.aclose()
    return PastRun(
        dataset=dataset,
        settings=settings,
        embedder_id=embedder.model_id,
        embedder_dim=embedder.dim,
        asked=asked,
        segments=segments,
        exchange_summaries=counts,
        seconds=time.perf_counter() - started,
    )


def _queries(conversation: Conversation, conversations: Sequence[Conversation], names: str) -> list[_Query]:
    """The conversation's questions, the next conversation's (names made neutral by their own speakers), chit-chat."""
    rename: Rename = renamer(conversation, names)
    found = [
        _Query("question" if q.category in HEADLINE_CATEGORIES else "adversarial", q.index, rename(q.text), q)
        for q in conversation.questions
        if q.category in HEADLINE_CATEGORIES or q.category == ADVERSARIAL_CATEGORY
    ]
    if len(conversations) > 1:
        following = conversations[(conversations.index(conversation) + 1) % len(conversations)]
        rename = renamer(following, names)
        found += [
            _Query("other_conversation", q.index, rename(q.text))
            for q in following.questions
            if q.category in HEADLINE_CATEGORIES
        ]
    return found + [_Query("chitchat", index, text) for index, text in enumerate(CHITCHAT)]


class _Asker:
    """Asks queries of one chat: each query's whole ranking through the retriever (gate open, every past
    segment), then its evidence sessions' exchanges in full."""

    def __init__(
        self,
        store: SqliteStore,
        embedder: Embedder,
        chat: PastChat,
        where: Mapping[str, tuple[int, int]],
        rag: RagConfig,
    ) -> None:
        self._store = store
        self._chat = chat
        self._where = where
        self._budget = rag.max_tokens
        settings = rag.model_copy(
            update={"enabled": True, "min_similarity": _OPEN_GATE, "conversation_limit": max(len(chat.sessions), 1)}
        )
        # The chat holds summaries and no messages, so every name a question asks would look unknown
        # (decision 165) and shut the summaries out: the names stage is left out of both.
        stages = default_pipeline(store, embedder).without("names")
        self._retriever = PastConversationRetriever(
            store, embedder, lambda: settings, pipeline=stages.without("format")
        )
        self._in_force = PastConversationRetriever(store, embedder, lambda: rag, pipeline=stages)

    async def __call__(self, sample_id: str, query: _Query) -> Asked:
        chat = self._chat
        found = await self._retriever.retrieve(chat.ref, chat.current_segment_id, query.text, self._budget)
        if found is None:
            raise PastSessionsRunError("past-conversation retrieval failed (see the log for the error)")
        question = query.question
        evidence = {self._where[dia_id] for dia_id in question.evidence} if question is not None else set()
        evidence_sessions = frozenset(session for session, _ in evidence)
        ranked: dict[int, list[tuple[bool, float]]] = {}
        for hit in found.exchanges:
            key = chat.exchanges[hit.summary.exchange_id or 0]
            ranked.setdefault(key[0], []).append((key in evidence, hit.similarity))
        shown = await self._in_force.retrieve(chat.ref, chat.current_segment_id, query.text, self._budget)
        if shown is None and self._in_force.enabled:
            raise PastSessionsRunError("past-conversation retrieval failed (see the log for the error)")
        return Asked(
            sample_id=sample_id,
            kind=query.kind,
            index=query.index,
            category=question.category if question is not None else None,
            evidence_sessions=evidence_sessions,
            segments=tuple((chat.sessions[hit.summary.segment_id], hit.similarity) for hit in found.segments),
            exchanges={session: tuple(hits) for session, hits in ranked.items()},
            evidence_exchange=await _evidence_exchange(self._store, chat, found, evidence, evidence_sessions),
            shown_sessions=tuple(chat.sessions[s.segment_id] for s in shown.shown) if shown else (),
            shown_exchanges=tuple(chat.exchanges[e.exchange_id] in evidence for s in shown.shown for e in s.exchanges)
            if shown
            else (),
            block_tokens=approximate_token_count(shown.block) if shown and shown.block else 0,
        )


async def _evidence_exchange(
    store: SqliteStore,
    chat: PastChat,
    found: Retrieval,
    evidence: set[tuple[int, int]],
    sessions: frozenset[int],
) -> EvidenceExchange | None:
    """The best evidence exchange, ranked among every exchange of its session by the exchanges stage."""
    segments = tuple(hit for hit in found.segments if chat.sessions[hit.summary.segment_id] in sessions)
    if not segments or found.vector is None:
        return None
    every = found.settings.model_copy(update={"exchange_limit_per_conversation": max(chat.longest_session, 1)})
    ranked = await SimilarExchanges(store)(found.replace(segments=segments, exchanges=(), settings=every))
    by_session: dict[int, list[tuple[tuple[int, int], SummaryHit]]] = {}
    for hit in ranked.exchanges:
        key = chat.exchanges[hit.summary.exchange_id or 0]
        by_session.setdefault(key[0], []).append((key, hit))
    best: EvidenceExchange | None = None
    for session, hits in by_session.items():
        for rank, (key, hit) in enumerate(hits, start=1):
            if key in evidence and (best is None or hit.similarity > best.similarity):
                others = tuple(other.similarity for other_key, other in hits if other_key not in evidence)
                best = EvidenceExchange(session, hit.similarity, rank, others)
    return best
