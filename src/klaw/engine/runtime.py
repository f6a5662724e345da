"""`Engine`: every part of the engine assembled on one KLAW_HOME, with start-up and shutdown.

Start-up: open the store, replay the log tail the database missed, start the embedding queue,
register tools, claim the socket file, queue the turns a crash left unanswered, start the scheduler,
and only then listen (a message arriving live is never resumed as well). Shutdown
(SIGTERM/SIGINT, docs/decisions/005-graceful-shutdown.md): stop
accepting new gateways and messages, stop firing scheduled tasks, let turns and task runs in flight
finish (60 s) while connected gateways still receive
their replies, only then tell gateways the engine is going, stop the embedding queue (pending jobs
stay queued), close the model clients and the store, remove the socket. The log needs no flush:
every append is fsync'd before it counts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from klaw.command_syntax import parse_command
from klaw.config import EngineConfig
from klaw.engine.clock import Clock, SystemClock
from klaw.engine.commands import CommandHandler
from klaw.engine.context_builder import ContextBuilder
from klaw.engine.delivery import Delivery, Outbound
from klaw.engine.frames import CommandFrame, DeltaFrame, InboundFrame, OutboundFrame
from klaw.engine.memory_commands import MemoryCommands
from klaw.engine.memory_settings import MemorySettings
from klaw.engine.processor import Inbound, MessageProcessor
from klaw.engine.queries import EngineQueries
from klaw.engine.scheduler_assembly import assemble_scheduler
from klaw.engine.scheduler_loop import Scheduler
from klaw.engine.sessions import SessionManager
from klaw.engine.slots import LlmSlots, Priority
from klaw.engine.socket_server import EngineSocketServer
from klaw.engine.system_prompt import SystemPrompt
from klaw.engine.turn_runner import TurnRunner
from klaw.home import KlawHome
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.router import ModelRouter
from klaw.memory.archival_memory import ArchivalMemory
from klaw.memory.auto_rag import AutoRagService
from klaw.memory.conversation_details import ConversationDetails
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.core_memory import CoreMemory
from klaw.memory.embedder.factory import create_embedder
from klaw.memory.embedder.memo import QueryMemo
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.forgetting import Forgetting
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.ingestion import Ingestion
from klaw.memory.past_conversations.retriever import PastConversationRetriever
from klaw.memory.summaries.service import SummarizerService
from klaw.memory.summaries.summary_export import export_unlogged_summaries
from klaw.memory.summaries.texts import SummaryTexts
from klaw.scheduling.names import SUBAGENT_CHANNEL
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from klaw.tools.builtin.defaults import register_builtin_tools
from klaw.tools.builtin.groups import tools_in
from klaw.tools.builtin.memory_tools import MemoryServices, register_memory_tools
from klaw.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_SECONDS = 60.0
LIVE_EMBEDDING_BATCH = 16


@dataclass(frozen=True)
class SubmitResult:
    """What happened to text a person sent: a command answered now, or a message accepted."""

    command_reply: str | None = None
    message_id: str | None = None


class Engine:
    def __init__(
        self,
        *,
        home: KlawHome,
        config: EngineConfig,
        store: SqliteStore,
        router: ModelRouter,
        embedder: Embedder,
        embedding_queue: EmbeddingQueue,
        sessions: SessionManager,
        processor: MessageProcessor,
        commands: CommandHandler,
        delivery: Delivery,
        socket: EngineSocketServer | None,
    ) -> None:
        self.home = home
        self.config = config
        self.store = store
        self.router = router
        self.embedder = embedder
        self.embedding_queue = embedding_queue
        self.sessions = sessions
        self.processor = processor
        self.commands = commands
        self.delivery = delivery
        self.socket = socket
        self.scheduler: Scheduler | None = None
        self.warming: asyncio.Task[None] | None = None  # filling the vector cache after start-up
        self.summarizer: SummarizerService | None = None

    @classmethod
    async def start(
        cls,
        home: KlawHome,
        config: EngineConfig,
        *,
        clock: Clock | None = None,
        listen: bool = True,
        router: ModelRouter | None = None,
    ) -> Engine:
        clock = clock or SystemClock()
        home.root.mkdir(parents=True, exist_ok=True)
        store = await SqliteStore.open(
            home.database_file(config.database.path),
            clock=clock.now,
            vector_cache_bytes=config.database.vector_cache_mb * 1024 * 1024,
            vector_search_threads=config.database.vector_search_threads,
        )
        embedder = create_embedder(config.embedder, sleep=clock.sleep)  # HTTP retries wait on engine time
        # Live batches stay small: a turn's query embedding waits behind the batch running on the
        # embedder's one thread (reindex, with nobody waiting, uses the full batch size).
        live_batch = min(config.embedder.batch_size, LIVE_EMBEDDING_BATCH)
        embedding_queue = EmbeddingQueue(store, embedder, clock, batch_size=live_batch)
        summarizer: SummarizerService | None = None
        try:
            # Refuses to start on vectors of another embedder (the error says to run `klaw reindex`).
            await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
            await store.memory_chunks.bind_embedder(embedder.model_id, embedder.dim)
            await store.summaries.bind_embedder(embedder.model_id, embedder.dim)
            # engine.yaml + what commands stored
            memory_settings = await MemorySettings(
                config.summarizer, config.embedder, config.rag, store.settings
            ).load()
            ingestion = Ingestion(
                ConversationLog(home.conversations),
                store,
                min_embed_tokens=config.auto_rag.min_message_tokens,
                on_embedding_queued=embedding_queue.notify,
            )
            await ingestion.recover()
            forgetting = Forgetting(ingestion, clock.now)
            await forgetting.finish_pending()  # log files a crash left holding forgotten records
            await export_unlogged_summaries(ingestion, clock.now)  # summaries from before they were logged
            if memory_settings.embeddings_enabled:
                embedding_queue.start()  # embeds what recovery and any earlier run left pending
            # auto-RAG and past conversations embed a turn's text once, waiting for it at most queryTimeoutSeconds
            query_embedder = QueryMemo(embedder, deadline_seconds=config.embedder.query_timeout_seconds)
            tools = ToolRegistry(offered=tools_in(config.tools.enabled))  # the groups engine.yaml offers
            register_builtin_tools(tools, allow_prompt_edits=config.tools.allow_prompt_edits)
            core_memory = CoreMemory(home.core_memory_file)
            memory_services = MemoryServices(
                details=ConversationDetails(store, SummaryTexts(store.summaries)),
                archival=ArchivalMemory(
                    ingestion,
                    embedder,
                    clock.now,
                    max_chars=config.memory.save_max_chars,
                    messages=HybridSearch(store, embedder, config.search),
                    relevance_threshold=config.auto_rag.relevance_threshold,
                ),
                core=core_memory,
                core_max_chars=config.memory.core_max_chars,
                window=config.context.sliding_window,
            )
            register_memory_tools(tools, memory_services)
            catalogue = ModelCatalogue.from_config(config)
            sessions = SessionManager(catalogue, store, ingestion, clock)
            delivery = Delivery()
            router = router or ModelRouter(catalogue, sleep=clock.sleep)
            turns = TurnRunner(
                model_for=router.client,
                tools=tools,
                workspace=home.workspace,
                clock=clock,
                max_rounds=config.processing.max_tool_call_rounds,
            )
            processor = MessageProcessor(
                config=config,
                store=store,
                ingestion=ingestion,
                sessions=sessions,
                context_builder=ContextBuilder(
                    catalogue,
                    config.context,
                    store,
                    SystemPrompt(home.workspace),
                    core_memory,
                    tools.specs(),
                    auto_rag=AutoRagService(config.auto_rag, HybridSearch(store, query_embedder, config.search)),
                    past_conversations=PastConversationRetriever(
                        store,
                        query_embedder,
                        lambda: memory_settings.rag,
                        search=config.search,
                        max_message_distance=config.auto_rag.relevance_threshold,
                    ),
                ),
                turns=turns,
                slots=LlmSlots(config.processing.max_concurrent_llm),
                delivery=delivery,
                clock=clock,
            )
            summarizer = SummarizerService(
                ingestion,
                lambda: router.for_task("summarization"),
                lambda: processor.slots.hold(Priority.BACKGROUND),
                clock,
                config.summarizer,
                on_embedding_queued=embedding_queue.notify,
            )
            ingestion.on_stored = summarizer.observe
            scheduler = assemble_scheduler(
                config=config,
                home=home,
                catalogue=router.catalogue,
                turns=turns,
                tools=tools,
                processor=processor,
                log=ingestion.log,
                core_memory=core_memory,
                delivery=delivery,
                clock=clock,
            )
            commands = CommandHandler(
                catalogue=catalogue,
                commands=config.commands,
                sessions=sessions,
                core_memory=core_memory,
                processor=processor,
                clock=clock,
                started_at=clock.now(),
                embedding_queue=embedding_queue,
                scheduler=scheduler,
                forgetting=forgetting,
                memory_commands=MemoryCommands(memory_settings, summarizer, embedding_queue, store),
            )
            engine = cls(
                home=home,
                config=config,
                store=store,
                router=router,
                embedder=embedder,
                embedding_queue=embedding_queue,
                sessions=sessions,
                processor=processor,
                commands=commands,
                delivery=delivery,
                socket=None,
            )
            if listen:
                search = HybridSearch(store, embedder, config.search)
                queries = EngineQueries(store, processor.context_history, search, memory_settings)
                engine.socket = EngineSocketServer(home.socket_path, _FrameAdapter(engine), queries=queries.answer)
                await engine.socket.bind()  # a second engine on this home stops here
                delivery.set_fallback(engine._send_over_socket)  # queued per channel until a gateway says hello
                delivery.set_streamer(engine.socket.wants_delta, engine._send_delta)
            # Messages a crash left unanswered get their turn (after the debounce, like any other), queued
            # before the socket opens: a message arriving live is then never resumed as well.
            await processor.resume_unanswered()
            engine.scheduler = scheduler
            await scheduler.start()  # after recovery, and once replies have somewhere to go
            if engine.socket is not None:
                await engine.socket.start()
            # Recent chats' vectors into memory (one pass), after the socket opens: start-up time must not
            # grow with chats x vectors; a turn meanwhile waits for, or loads, its own chat's vectors.
            engine.warming = asyncio.create_task(_warm_vector_cache(store), name="warm-vector-cache")
            engine.summarizer = summarizer
            if memory_settings.summarizer_enabled:
                summarizer.start()  # after recovery: summarizes what earlier runs left
        except BaseException:
            if summarizer is not None:
                await summarizer.aclose()
            await embedding_queue.aclose()
            await embedder.aclose()
            await store.aclose()
            raise
        return engine

    async def submit(self, chat: ChatRef, text: str, message_id: str | None = None) -> SubmitResult:
        """Text from a person: a slash command is answered at once, anything else is accepted."""
        _refuse_task_channel(chat)
        command = parse_command(text)
        if command is not None:
            reply = await self.commands.handle(chat, command.name, command.args, command_id=message_id)
            return SubmitResult(command_reply=reply)
        stored = await self.processor.handle_inbound(Inbound(chat, text, message_id))
        return SubmitResult(message_id=stored.record.id)

    async def _send_over_socket(self, outbound: Outbound) -> None:
        if self.socket is not None:
            await self.socket.send_outbound(
                OutboundFrame(
                    channel=outbound.chat.channel,
                    chat_id=outbound.chat.chat_id,
                    text=outbound.text,
                    reply_to=outbound.reply_to,
                    kind=outbound.kind,
                    task=outbound.task,
                )
            )

    async def _send_delta(self, delta: Outbound) -> None:
        if self.socket is not None:
            chat = delta.chat
            frame = DeltaFrame(channel=chat.channel, chat_id=chat.chat_id, text=delta.text, reply_to=delta.reply_to)
            await self.socket.send_delta(frame)

    async def _drain_runs(self, timeout_seconds: float) -> bool:
        return await self.scheduler.runner.drain(timeout_seconds) if self.scheduler is not None else True

    async def shutdown(self, timeout_seconds: float = SHUTDOWN_TIMEOUT_SECONDS) -> None:
        """Stop taking work, finish the turns in flight, then say goodbye and close.

        The `shutdown` frame goes out only after the drain: a gateway may disconnect as soon as it
        reads it, and the replies produced while draining must reach it first. Connections stay
        open during the drain; inbound frames then get an error (not stored, send again later).
        """
        self.processor.stop_accepting()
        if self.socket is not None:
            await self.socket.stop_accepting()
        if self.scheduler is not None:
            await self.scheduler.stop()  # fires nothing more; runs already started finish in the drain
        if not all(await asyncio.gather(self.processor.drain(timeout_seconds), self._drain_runs(timeout_seconds))):
            log.warning("shutdown: turns or task runs still running after %.0f s were cancelled", timeout_seconds)
        if self.socket is not None:
            await self.socket.broadcast_shutdown("engine stopping")
        # After the drain (its replies queue jobs too), before the embedder and store close; what is
        # still pending stays in embedding_jobs for the next start.
        if self.summarizer is not None:
            await self.summarizer.aclose()  # before the queue: a summary written now queues an embedding
        if self.warming is not None:
            await asyncio.gather(self.warming, return_exceptions=True)  # one database call; let it end
        await self.embedding_queue.aclose()
        await self.router.aclose()
        await self.embedder.aclose()
        if self.socket is not None:
            await self.socket.aclose()
        await self.store.aclose()


async def _warm_vector_cache(store: SqliteStore) -> None:
    try:
        loaded = await store.vectors.warm_cache()
    except Exception as exc:  # only a slower first search: searches load their chat themselves
        log.warning("could not warm the vector cache: %s", type(exc).__name__)
        return
    log.info("vector cache warmed: %d chat(s)", loaded)


def _refuse_task_channel(chat: ChatRef) -> None:
    """The `scheduler` channel names scheduled tasks' logs (klaw/scheduling/names.py); no person writes there."""
    if chat.channel == SUBAGENT_CHANNEL:
        raise ValueError(f"the channel {SUBAGENT_CHANNEL!r} is reserved for scheduled tasks")


class _FrameAdapter:
    """Socket frames → engine calls (the socket server's FrameHandler)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def on_inbound(self, frame: InboundFrame) -> None:
        """Raw text from a gateway, read exactly as the console's: `/status` is a command there too.

        A gateway forwarding whatever its person typed need not know klaw's commands; the answer
        comes back as a `notice` replying to the frame, like a `command` frame's.
        """
        chat = ChatRef(frame.channel, frame.chat_id)
        result = await self._engine.submit(chat, frame.text, frame.id)
        if result.command_reply is not None:
            await self._engine.delivery.deliver(Outbound(chat, result.command_reply, frame.id, "notice"))

    async def on_command(self, frame: CommandFrame) -> None:
        chat = ChatRef(frame.channel, frame.chat_id)
        _refuse_task_channel(chat)
        reply = await self._engine.commands.handle(chat, frame.command, frame.args, command_id=frame.id)
        await self._engine.delivery.deliver(Outbound(chat, reply, frame.id, "notice"))
