"""The engine's memory half, built for `engine/assembly.py`: the store, the embedder and its warm-up, the
embedding queue, ingestion with the log tail replayed, forgetting, core memory (`open_memory`), and the
memory services the tools use (`memory_services`). Each part registers its close on the start-up's exit
stack the moment it exists, as every part does (docs/decisions/090-engine-assembly.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from klaw.config import EngineConfig
from klaw.engine.chat_leases import engine_name
from klaw.engine.clock import Clock
from klaw.engine.delivery import Delivery, Outbound
from klaw.engine.memory_settings import MemorySettings
from klaw.home import KlawHome
from klaw.home_identity import home_identity
from klaw.memory.archival_memory import ArchivalMemory
from klaw.memory.conversation_details import ConversationDetails
from klaw.memory.conversation_log import open_log
from klaw.memory.core_memory import CoreMemory
from klaw.memory.embedder.embed_once import EmbedOnce, embed_once
from klaw.memory.embedder.factory import create_embedder
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.embedder.warm_up import WarmUp
from klaw.memory.embedding_policy import should_embed
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.forgetting import Forgetting
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.ingestion import Ingestion
from klaw.memory.migrated_copy import MigratedCopy
from klaw.memory.reindex_leftover import warn_of_leftover_reindex
from klaw.memory.summaries.summary_export import export_unlogged_summaries
from klaw.memory.summaries.texts import SummaryTexts
from klaw.memory.turn_gate import TurnGate
from klaw.private_files import private_dirs
from klaw.store.backend import open_storage
from klaw.store.protocol import Storage, StorageError
from klaw.store.records import ChatRef, MessageRecord, StoredMessage
from klaw.store.work_protocol import ChatLeaseRepository
from klaw.tools.builtin.memory_tools import MemoryServices

LIVE_EMBEDDING_BATCH = 16
DOCS_WARM_DELAY_SECONDS = 10.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Memory:
    """The memory side, recovered and ready: what a turn reads and writes."""

    store: Storage
    embedder: Embedder
    # what the queue and the turns' queries embed through: a text once for both when the embedder's
    # query and stored forms are the same (embed_once.py), else `embedder` itself
    shared: Embedder
    embedding_queue: EmbeddingQueue
    ingestion: Ingestion
    forgetting: Forgetting
    settings: MemorySettings
    core: CoreMemory
    observers: list[Callable[[StoredMessage], None]]  # told of every stored record
    warm_up: WarmUp  # the local model's load, started with the engine; a turn's query waits for it
    one_message: bool = False  # started to answer one piped message: nothing embedded before it is needed


async def open_memory(
    home: KlawHome,
    config: EngineConfig,
    clock: Clock,
    stack: AsyncExitStack,
    embedder: Embedder | None,
    *,
    one_message: ChatRef | None = None,
    holder: str | None = None,
) -> Memory:
    """Store, embedder and queue opened, the log tail replayed, interrupted forgets finished. `one_message`:
    the chat of the one piped message this engine is started for: a local model loads at start only when
    that chat's turn will search with a vector, else when something first embeds (decision 499). `holder`:
    this engine's name among those sharing a PostgreSQL store (its chat leases' holder)."""
    private_dirs(home.root)
    store = await open_storage(
        home.database_file(config.database.path), config.database, clock=clock.now, creating=True
    )
    stack.push_async_callback(store.aclose)
    await warn_of_leftover_reindex(home.database_file(config.database.path), config.database)
    if embedder is None:
        # HTTP retries wait on engine time; the local model's ONNX graphs are cached in the home
        embedder = create_embedder(config.embedder, sleep=clock.sleep, cache_dir=home.embedder_cache)
    stack.push_async_callback(embedder.aclose)
    # loads on the model's thread while the rest starts (decision 260); for one message, when first needed (499)
    warm_up = WarmUp.start(embedder, now=one_message is None)
    stack.push_async_callback(warm_up.aclose)
    shared = embed_once(embedder)
    if shared is not embedder:
        stack.push_async_callback(shared.aclose)
    # Live batches stay small: a turn's query embedding waits behind the batch running on the
    # embedder's one thread (reindex, with nobody waiting, uses the full batch size).
    # A pass starts between turns (decision 426): the turns mark themselves in the gate ingestion holds.
    turns = TurnGate()
    queue = EmbeddingQueue(
        store,
        shared,
        clock,
        batch_size=min(config.embedder.batch_size, LIVE_EMBEDDING_BATCH),
        between_turns=turns.quiet,
    )
    stack.push_async_callback(queue.aclose)
    if store.leases is not None:  # another engine live on the database with another embedder: refused (532)
        name = holder or engine_name()
        identity = await asyncio.to_thread(home_identity, home)  # a copy of this home running elsewhere (539)
        if moved := await store.leases.join(
            name, (embedder.model_id, embedder.dim), config.database.lease_seconds, identity
        ):
            log.warning("%s", moved)
        stack.push_async_callback(_leave, store.leases, name)  # a start failing later; ChatLeases' close too
    # Refuses to start on vectors of another embedder (the error says to run `klaw reindex`).
    await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
    await store.memory_chunks.bind_embedder(embedder.model_id, embedder.dim)
    await store.summaries.bind_embedder(embedder.model_id, embedder.dim)
    # engine.yaml + what commands stored
    settings = await MemorySettings(config.summarizer, config.embedder, config.rag, store.settings).load()
    observers: list[Callable[[StoredMessage], None]] = []
    ingestion = Ingestion(
        open_log(home.conversations, kept_by_store=store.keeps_log),
        store,
        min_embed_tokens=config.auto_rag.min_message_tokens,
        on_embedding_queued=queue.notify,
        observers=observers,
        turns=turns,
    )
    # Closed after every part that writes records (turns, summarizers, forgets) and before the queue and
    # store: an accept still under way (shielded, so a summarizer's outlives its cancelled task) is stored,
    # not written into a closed store as a "Task exception was never retrieved" at exit.
    stack.push_async_callback(ingestion.close)  # settled, then the log's watermark (decision 477)
    await ingestion.recover()
    forgetting = Forgetting(ingestion, clock.now, MigratedCopy(home, config.database))  # decision 539
    await forgetting.finish_pending()  # log files a crash left holding forgotten records
    await export_unlogged_summaries(ingestion, clock.now)  # summaries from before they were logged
    if one_message is not None and await _searches_first(store, one_message, config):
        warm_up.begin()  # the turn waits for the model: its load overlaps the rest of the start, as before
    if settings.embeddings_enabled:
        queue.start()  # embeds what recovery and any earlier run left pending
    core = CoreMemory(home.core_memory_file)
    alone = one_message is not None
    return Memory(store, embedder, shared, queue, ingestion, forgetting, settings, core, observers, warm_up, alone)


async def _leave(leases: ChatLeaseRepository, holder: str) -> None:
    """This engine's record on the shared store given back (unreleased, it expires with its lease time)."""
    with contextlib.suppress(StorageError):
        await leases.release_all(holder)


async def _searches_first(store: Storage, chat: ChatRef, config: EngineConfig) -> bool:
    """Whether `chat`'s next turn will likely embed its text to search: its open segment already holds more
    than the sliding window (auto-RAG's guard, decision 470), or it has a summarized past segment (past
    conversations' guard). A guess for when the model's load begins, never for what a turn finds: a turn
    that searches waits for the load either way, outside its query's deadline (decision 260). Reads only:
    a chat never seen gets no segment from it."""
    if not (config.auto_rag.enabled or config.rag.enabled):
        return False
    open_ = [segment.id for segment in await store.segments.list(chat) if segment.ended_at is None]
    current = open_[-1] if open_ else None
    window = config.context.sliding_window
    if current is not None and await store.messages.count_in_segment(current, at_most=window + 1) > window:
        return True
    return await store.summaries.has_past_segments(chat, exclude_segment_id=current)


def prepare_vector(config: EngineConfig, memory: Memory) -> Callable[[MessageRecord], None] | None:
    """What the processor calls on each message it is about to accept: its vector started at once when
    the queue and the turn's query will both take it (embedder forms alike, embeddings on, long enough
    to be stored), so it is computed while the log is fsync'd and the exchange opened; None otherwise, and
    for an engine answering one piped message: its turn embeds the text only when it searches, and the
    queue after the reply (decision 499), so a turn that searches nothing loads no model before it."""
    shared = memory.shared
    if not isinstance(shared, EmbedOnce) or memory.one_message:
        return None
    min_tokens = config.auto_rag.min_message_tokens

    def prepare(record: MessageRecord) -> None:
        if memory.settings.embeddings_enabled and should_embed(record, min_tokens):
            shared.prepare(record.content)

    return prepare


def memory_services(config: EngineConfig, memory: Memory, clock: Clock, delivery: Delivery) -> MemoryServices:
    store = memory.store

    async def announce(chat: ChatRef, text: str) -> None:
        await delivery.deliver(Outbound(chat, text, None, "notice"))

    return MemoryServices(
        details=ConversationDetails(store, SummaryTexts(store.summaries)),
        archival=ArchivalMemory(
            memory.ingestion,
            memory.embedder,
            clock.now,
            max_chars=config.memory.save_max_chars,
            messages=HybridSearch(store, memory.embedder, config.search),
            relevance_threshold=config.auto_rag.relevance_threshold,
        ),
        core=memory.core,
        core_max_chars=config.memory.core_max_chars,
        window=config.context.sliding_window,
        announce=announce,
    )
