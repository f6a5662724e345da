"""Building the engine's parts, each by a small function that returns it whole, under one exit stack.

Every part that holds something (the store's thread and file, the embedder, model HTTP pools, the
embedding queue's task, the summarizers, the socket, the scheduler) registers its close on the
`AsyncExitStack` the moment it exists, so a failure at any later step of start-up closes everything
already started, in reverse, and shutdown closes it the same way once turns are drained
(docs/decisions/090-engine-assembly.md). Parts get what they use at construction: callbacks and
subscriber lists are passed in, never assigned afterwards; where two parts need each other (a stored
record wakes the summarizers, which store records) a subscriber list is created first and filled.

The order is the start-up order: memory (store, embedder, recovery), tools (MCP servers started), the turn's parts, the
scheduler, the socket claimed, unanswered messages resumed, the scheduler started, then listening.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from klaw.config import EngineConfig
from klaw.config.tools import writes_unheld
from klaw.engine.agent_messages import AgentMessages
from klaw.engine.answered_elsewhere import RESUME_WITHIN
from klaw.engine.approval import ApprovalGate
from klaw.engine.budget_room import log_too_small, too_small
from klaw.engine.chat_leases import ChatLeases, engine_name
from klaw.engine.clock import Clock
from klaw.engine.commands import CommandHandler
from klaw.engine.config_drift import ConfigFileNote
from klaw.engine.context_builder import SAFETY_MARGIN, ContextBuilder
from klaw.engine.delivery import Delivery, Sink
from klaw.engine.memory_commands import MemoryCommands
from klaw.engine.memory_parts import Memory, memory_services, open_memory, prepare_vector
from klaw.engine.message_budget import turn_note
from klaw.engine.message_origins import RESTART
from klaw.engine.open_questions import OpenQuestions
from klaw.engine.processor import MessageProcessor
from klaw.engine.scheduler_assembly import assemble_scheduler
from klaw.engine.scheduler_loop import Scheduler
from klaw.engine.sessions import SessionManager
from klaw.engine.slots import LlmSlots, Priority
from klaw.engine.socket_server import EngineSocketServer
from klaw.engine.system_prompt import SystemPrompt
from klaw.engine.tool_assembly import (
    docs_index,
    provide_late_groups,
    skill_catalogue,
    start_mcp_servers,
    tool_registry,
    unavailable_tools,
)
from klaw.engine.tool_listing import ToolListing
from klaw.engine.turn_runner import TurnRunner
from klaw.home import KlawHome
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.router import ModelRouter
from klaw.memory.auto_rag import AutoRagService
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.memo import QueryMemo
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.forget_words import ForgetWords
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.past_conversations.retriever import PastConversationRetriever
from klaw.memory.summaries.service import SummarizerService
from klaw.scheduling.granted_words import schedule_add_grants
from klaw.scheduling.tools import asks_for_more_than_its_chat
from klaw.store.backend import store_line
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef
from klaw.tools.builtin.groups import DOCS, MEMORY, MESSAGES, SCHEDULER, SEND_PLACES, SKILLS
from klaw.tools.docs.index import DocsIndex
from klaw.tools.docs.tools import DOCS_PROMPT
from klaw.tools.groups import ServiceKey
from klaw.tools.mcp.servers import McpServers
from klaw.tools.messaging.send import message_targets
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolFunction
from klaw.tools.selection import ToolSelection
from klaw.tools.skills.catalogue import SkillCatalogue
from klaw.tools.skills.skill_call import call_layer
from klaw.tools.web.addresses import metadata_warnings

LIVE_EMBEDDING_BATCH = 16
DOCS_WARM_DELAY_SECONDS = 10.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parts:
    """Everything `Engine` holds; closed by the exit stack it was built under."""

    memory: Memory
    router: ModelRouter
    tools: ToolRegistry
    selection: ToolSelection
    sessions: SessionManager
    delivery: Delivery
    processor: MessageProcessor
    summarizer: SummarizerService
    scheduler: Scheduler
    commands: CommandHandler
    socket: EngineSocketServer | None
    approvals: ApprovalGate
    mcp_servers: McpServers
    docs: DocsIndex | None  # klaw's own docs for docs_search, built in the background after start-up
    tool_listing: ToolListing  # each chat's tools as its model gets them (/tools, the `tools` query)


def chat_leases(config: EngineConfig, store: Storage, stack: AsyncExitStack, holder: str) -> ChatLeases | None:
    """This engine's chat leases on a store several engines may share (None: one engine owns it);
    given back at close, so another engine takes these chats at once."""
    if store.leases is None:
        return None
    leases = ChatLeases(store.leases, config.database.lease_seconds, holder)
    stack.push_async_callback(leases.aclose)
    return leases


def open_router(config: EngineConfig, clock: Clock, stack: AsyncExitStack, router: ModelRouter | None) -> ModelRouter:
    router = router or ModelRouter(ModelCatalogue.from_config(config), sleep=clock.sleep)
    stack.push_async_callback(router.aclose)
    return router


def context_builder(
    home: KlawHome,
    config: EngineConfig,
    catalogue: ModelCatalogue,
    memory: Memory,
    tools: ToolSelection,
    skills: SkillCatalogue | None,
    docs: DocsIndex | None,
) -> ContextBuilder:
    store = memory.store
    # auto-RAG and past conversations embed a turn's text once, waiting for it at most queryTimeoutSeconds
    # (after the local model's load, which is not the query's to pay)
    query_embedder = QueryMemo(
        memory.shared, deadline_seconds=config.embedder.query_timeout_seconds, warm_up=memory.warm_up
    )
    return ContextBuilder(
        catalogue,
        config.context,
        store,
        # `/status` before any turn reads the prompt files for the default model's budget (decision 473)
        SystemPrompt(
            home.workspace,
            DOCS_PROMPT if docs is not None else None,
            int(catalogue.context_budget(config.routing.default) * SAFETY_MARGIN),
        ),
        memory.core,
        tools.specs,  # the session's model's tools
        auto_rag=AutoRagService(config.auto_rag, HybridSearch(store, query_embedder, config.search)),
        past_conversations=PastConversationRetriever(
            store,
            query_embedder,
            lambda: memory.settings.rag,
            search=config.search,
            max_message_distance=config.auto_rag.relevance_threshold,
        ),
        skills=None if skills is None else lambda: skills.layer(config.tools.skills.budget_tokens),
        kept_skills=None if skills is None else lambda: skills.kept_layer(config.tools.skills.budget_tokens),
        skill_call=None
        if skills is None
        else lambda texts: call_layer(texts, skills.current().skills, max_bytes=config.tools.skills.max_file_bytes),
    )


async def assemble(
    home: KlawHome,
    config: EngineConfig,
    clock: Clock,
    stack: AsyncExitStack,
    *,
    listen: bool,
    router: ModelRouter | None = None,
    embedder: Embedder | None = None,
    tools: Sequence[ToolFunction] = (),
    channels: Mapping[str, Sink] | None = None,
    config_file: ConfigFileNote | None = None,
    one_message: ChatRef | None = None,
) -> Parts:
    """Every part built and started (listening last when `listen`); each close is on `stack`.
    `channels`: in-process sinks registered before recovery, so a reply sent again at start reaches them.
    `config_file`: engine.yaml as `config` was read from it (None: not from the file), for "restart it".
    `one_message`: an engine for one piped message, whose embedder loads when first needed (decision 499)."""
    holder = engine_name()  # this engine among those sharing a PostgreSQL store: its records and leases
    memory = await open_memory(home, config, clock, stack, embedder, one_message=one_message, holder=holder)
    skills = skill_catalogue(home, config)
    docs = docs_index(home, config, memory.embedder)
    socket = EngineSocketServer(home.socket_path) if listen else None
    delivery = Delivery(
        fallback=socket.send_reply if socket is not None else None,
        streamer=(socket.wants_delta, socket.send_reply_delta) if socket is not None else None,
        served=socket.serves if socket is not None else None,
        confirm=memory.store.exchanges.mark_delivered,
    )
    stack.push_async_callback(delivery.settle)  # replies shown before the close are noted before the store closes
    for channel, sink in (channels or {}).items():
        delivery.register(channel, sink)
    early: dict[ServiceKey[Any], object] = {MEMORY: memory_services(config, memory, clock, delivery)}
    early |= {key: value for key, value in ((SKILLS, skills), (DOCS, docs)) if value is not None}
    # off the loop: a plugin's import or provider may take its time (bounded; decisions 466, 540), and the loop
    # is a program's own when a library Klaw starts (a provider sleeping 8 s stalled it 8 s)
    selection = await asyncio.to_thread(tool_registry, home, config, early, tools)
    registry = selection.registry
    if (unheld := writes_unheld(config.tools.approval, registry.names)) is not None:
        log.warning("%s", unheld)  # klaw config check's warning, in the start's log too (decision 515)
    for said in metadata_warnings(config.web.fetch.allowed_networks()):  # and this one (decision 523)
        log.warning("%s", said)
    appendix = DOCS_PROMPT if docs is not None else None  # the budget too small for prompt and tools: said (500)
    log_too_small(await asyncio.to_thread(too_small, home.workspace, config, selection.specs, appendix))
    mcp_servers = await start_mcp_servers(home, config, clock, stack, registry)
    router = open_router(config, clock, stack, router)
    slots = LlmSlots(config.processing.max_concurrent_llm)
    approvals = ApprovalGate(
        tools=config.tools.approval,
        timeout_seconds=config.tools.approval_timeout_seconds,
        clock=clock,
        delivery=delivery,
        # a task allowed held tools, or reporting into another chat: the person says yes first (decision 379)
        conditions={"schedule_add": functools.partial(asks_for_more_than_its_chat, targets=message_targets(config))},
        grants={"schedule_add": schedule_add_grants},  # what a yes grants, in words (decision 525)
        # read before any turn: a kill -9 left them (decision 447); on a shared store kept there too (466)
        noted=OpenQuestions(home.open_questions_file, memory.store.settings if memory.store.leases else None),
        declared=lambda: registry.held((), config.tools.approval_waived),  # tools marked requires_approval (540)
    )
    turns = TurnRunner(
        model_for=router.client,
        tools=registry,
        workspace=home.workspace,
        clock=clock,
        max_rounds=config.processing.max_tool_call_rounds,
        max_calls=config.tools.max_calls_per_response,
        approvals=approvals,
    )
    sessions = SessionManager(router.catalogue, memory.store, memory.ingestion, clock)
    leases = chat_leases(config, memory.store, stack, holder)
    processor = MessageProcessor(
        config=config,
        store=memory.store,
        ingestion=memory.ingestion,
        sessions=sessions,
        context_builder=context_builder(home, config, router.catalogue, memory, selection, skills, docs),
        turns=turns,
        slots=slots,
        delivery=delivery,
        clock=clock,
        leases=leases,
        prepare_vector=prepare_vector(config, memory),
        over_budget=lambda pending, model: turn_note(pending, model, router.catalogue, home.workspace),
    )
    processor.resuming.noted = approvals.noted  # the chat's first turn after a kill writes their calls as not run
    stack.callback(processor.abandon)  # a failure after resume: its timers go; shutdown has drained them
    summarizer = SummarizerService(
        memory.ingestion,
        lambda: router.for_task("summarization"),
        lambda: slots.hold(Priority.BACKGROUND),
        clock,
        config.summarizer,
        on_embedding_queued=memory.embedding_queue.notify,
    )
    stack.push_async_callback(summarizer.aclose)
    memory.observers.append(summarizer.observe)
    scheduler = assemble_scheduler(
        config=config,
        home=home,
        catalogue=router.catalogue,
        turns=turns,
        tools=registry,
        processor=processor,
        log=ConversationLog(home.conversations),  # task runs are the home's own files, whatever the store
        core_memory=memory.core,
        delivery=delivery,
        clock=clock,
        specs_for=selection.specs,
    )
    scheduler.open_questions = approvals.noted  # a cut-off run's open question is told as never approved (535)
    late: dict[ServiceKey[Any], object] = {
        SCHEDULER: scheduler,
        MESSAGES: AgentMessages(processor, delivery),
        SEND_PLACES: memory.store.sends,
    }
    provide_late_groups(home, config, selection, late)
    listing = ToolListing(config, router.catalogue, memory.store, selection, mcp_servers.states, skills, config_file)
    commands = CommandHandler(
        catalogue=router.catalogue,
        commands=config.commands,
        sessions=sessions,
        core_memory=memory.core,
        processor=processor,
        clock=clock,
        started_at=clock.now(),
        embedding_queue=memory.embedding_queue,
        scheduler=scheduler,
        forgetting=memory.forgetting,
        forget_words=ForgetWords(home, config.database),
        memory_commands=MemoryCommands(memory.settings, summarizer, memory.embedding_queue, memory.store),
        approvals=approvals,
        saved_memories=memory.store.memory_chunks,
        tool_listing=listing,
        stand_in=router.stand_in,
        skill=(lambda _name: None) if skills is None else (lambda name: skills.current().skills.get(name)),
        skill_names=(lambda: ())
        if skills is None
        else (lambda: {s.name: s.summary for s in skills.current().skills.values() if s.user_invocable}),
        skipped_skills=(lambda: ()) if skills is None else (lambda: skills.current().skipped),
        status_first=[] if config_file is None else [config_file.status_lines],
        status_lines=[
            lambda: [store_line(home.database_file(config.database.path), config.database)],
            memory.warm_up.status_lines,
            mcp_servers.status_lines,
            lambda: unavailable_tools(selection),
            processor.context_builder.system_prompt.status_lines,  # a prompt file cut at its cap, or left out
        ],
    )
    parts = Parts(
        memory,
        router,
        registry,
        selection,
        sessions,
        delivery,
        processor,
        summarizer,
        scheduler,
        commands,
        socket,
        approvals,
        mcp_servers,
        docs,
        listing,
    )
    if socket is not None:
        await socket.bind()  # a second engine on this home stops here, before any turn runs
        stack.push_async_callback(socket.aclose)
    # Messages a crash left unanswered get their turn (after the debounce, like any other), queued
    # before the socket listens: a message arriving live is then never resumed as well.
    await processor.resuming.resume_unanswered()
    if socket is not None:  # their replies say they answer a message of before the restart (decision 535)
        socket.origins.note(processor.resuming.queued_again(), RESTART)
    await processor.resuming.redeliver()  # replies a crash left unconfirmed: queued until their gateway says hello
    if leases is not None:  # chats an engine sharing the store left unanswered when it died
        # back from a stall to a database another embedder took: no more vectors of its own (decision 541)
        leases.start(processor.resuming.take_over, clock.now, RESUME_WITHIN, memory.embedding_queue.stop_for_good)
    await scheduler.start()  # after recovery, and once replies have somewhere to go
    stack.push_async_callback(scheduler.stop)
    if docs is not None:  # built (once per klaw version and embedder) before the first docs_search needs it
        stack.push_async_callback(docs.warm_in_background(lambda: clock.sleep(DOCS_WARM_DELAY_SECONDS)))
    if memory.settings.summarizer_enabled:
        summarizer.start()  # after recovery: summarizes what earlier runs left
    return parts
