"""`Engine`: every part of the engine assembled on one KLAW_HOME, with start-up and shutdown.

Start-up: hold the home (its lock, docs/decisions/233-home-lock.md: one engine per home, listening
or not), open the store, replay the log tail the database missed, start the embedding queue,
register tools, claim the socket file, queue the turns a crash left unanswered, start the scheduler,
and only then listen (a message arriving live is never resumed as well). Shutdown
(SIGTERM/SIGINT, docs/decisions/005-graceful-shutdown.md): stop
accepting new gateways and messages, stop firing scheduled tasks, let turns and task runs in flight
finish (60 s) while connected gateways still receive
their replies, only then tell gateways the engine is going, stop the embedding queue (pending jobs
stay queued), close the model clients and the store, remove the socket, let the home go. The log needs no flush:
every append is fsync'd before it counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from klaw.command_syntax import parse_command
from klaw.config import EngineConfig
from klaw.engine.assembly import Parts, assemble
from klaw.engine.chat_reading import ChatReader
from klaw.engine.clock import Clock, SystemClock
from klaw.engine.config_drift import ConfigFileNote
from klaw.engine.delivery import Outbound, Sink
from klaw.engine.drain_deadline import DrainDeadline
from klaw.engine.frame_dispatch import QueryError
from klaw.engine.frames import CommandFrame, DeliveredFrame, InboundFrame
from klaw.engine.full_text_upkeep import FullTextUpkeep
from klaw.engine.gateway_connection import ASKING
from klaw.engine.memory_access import MemoryAccess
from klaw.engine.memory_parts import memory_services
from klaw.engine.processor import Inbound, MessageProcessor
from klaw.engine.queries import Answer, EngineQueries, named_chat
from klaw.engine.schedule_query import schedule_answer
from klaw.engine.scheduler_loop import Scheduler
from klaw.engine.socket_file import hold_database, hold_home
from klaw.engine.status_query import status_answer
from klaw.engine.subagents import SubagentRunner
from klaw.engine.turn_cancel import cancel_turn, cancel_turn_answer
from klaw.home import KlawHome
from klaw.llm.router import ModelRouter
from klaw.memory.chunk_search import ChunkSearch
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.summaries.service import SummarizerService
from klaw.message_text import check_message
from klaw.scheduling.names import SUBAGENT_CHANNEL
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from klaw.tools.schema import ToolFunction

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_SECONDS = 60.0
# A piped chat's wait, after its reply, for its message's and reply's vectors (a local model's load included:
# 1.8-5.6 s measured at a load of 8 on 2 CPUs, decision 260); a remote embedder that hangs ends it (decision 499)
ONE_MESSAGE_EMBED_SECONDS = 15.0


@dataclass(frozen=True)
class SubmitResult:
    """What happened to text a person sent: a command answered now, or a message accepted."""

    command_reply: str | None = None
    message_id: str | None = None
    erased: bool = False  # the command erased something of the chat (`/forget` carried out)


class Engine:
    """The running engine: its parts (engine/assembly.py) and the exit stack that closes them."""

    def __init__(
        self, *, home: KlawHome, config: EngineConfig, parts: Parts, lifetimes: AsyncExitStack, chats: ChatReader
    ) -> None:
        self.home = home
        self.config = config
        self._lifetimes = lifetimes
        self.store = parts.memory.store
        self.embedder = parts.memory.embedder
        self.embedding_queue = parts.memory.embedding_queue
        self.memory_settings = parts.memory.settings  # engine.yaml's memory settings with /rag, /summarizer's
        self.router = parts.router
        self.tools = parts.tools
        self.tool_selection = parts.selection  # which group offered each tool, and each model's tools
        self.chats = chats  # each chat as a person could read it (history, turns, sessions, memory)
        self.sessions = parts.sessions
        self.processor = parts.processor
        self.commands = parts.commands
        self.delivery = parts.delivery
        self.socket = parts.socket
        self.approvals = parts.approvals
        self.mcp_servers = parts.mcp_servers
        self.docs = parts.docs  # `await engine.docs.ensure()` builds it now (a bench, before timing)
        self.tool_listing = parts.tool_listing  # each chat's tools as its model gets them (/tools, klaw tools)
        self.scheduler: Scheduler | None = parts.scheduler
        self.summarizer: SummarizerService | None = parts.summarizer
        self.warming: asyncio.Task[None] | None = None  # filling the vector cache after start-up
        self._deadline = DrainDeadline()  # the shutdown's wait for turns in flight, which quit_at_once ends
        self.memory_access: MemoryAccess | None = None  # a chat's memory for `klaw mcp serve`

    @classmethod
    async def start(
        cls,
        home: KlawHome,
        config: EngineConfig,
        *,
        clock: Clock | None = None,
        listen: bool = True,
        router: ModelRouter | None = None,
        embedder: Embedder | None = None,
        tools: Sequence[ToolFunction] = (),
        channels: Mapping[str, Sink] | None = None,
        config_file: ConfigFileNote | None = None,
        one_message: ChatRef | None = None,
    ) -> Engine:
        """Build and start every part; a failure at any step closes what was started, in reverse.

        `router`, `embedder` and `tools` (plain typed async functions, always offered) replace or add
        to what engine.yaml configures; the engine closes a router or embedder it is given. `channels`:
        in-process sinks (channel name to sink) registered before start-up recovery, so the replies a
        crash left unconfirmed, sent again at start, reach them (decision 101). `config_file`: engine.yaml as
        `config` was read from it (`ConfigFileNote.of(loaded)`: the loader's bytes, not read again), so `/status`,
        `/tools` and `klaw config check` can say an edit made since then needs a restart; None when `config`
        did not come from the file (decision 474). `one_message`: started to answer one piped message (`echo …
        | klaw chat`): a local embedder loads when something first embeds, not at start, and the message's
        vector is made after its reply (`embed_what_waits`), not before its turn (decision 499)."""
        lifetimes = AsyncExitStack()
        clock = clock or SystemClock()
        try:
            hold_home(home, lifetimes)  # first taken, last given back: the store is closed by then
            hold_database(home, config.database.backend, config.database.path, lifetimes)  # klaw.db elsewhere (532)
            parts = await assemble(
                home,
                config,
                clock,
                lifetimes,
                listen=listen,
                router=router,
                embedder=embedder,
                tools=tools,
                channels=channels,
                config_file=config_file,
                one_message=one_message,
            )
            services = memory_services(config, parts.memory, clock, parts.delivery)
            messages = HybridSearch(parts.memory.store, parts.memory.embedder, config.search)
            chats = ChatReader(
                parts.memory.store, messages, ChunkSearch(parts.memory.store, parts.memory.embedder), services.core
            )
            engine = cls(home=home, config=config, parts=parts, lifetimes=lifetimes, chats=chats)
            engine.memory_access = MemoryAccess(services, home.workspace)
            if parts.socket is not None:  # listening last: recovery and resume are done
                extra: dict[str, Answer] = {
                    "memory_tool": engine.memory_access.answer,
                    "tools": parts.tool_listing.answer,
                    "forget": functools.partial(_forget_said, parts),  # `klaw memory forget` while this runs
                    "cancel_turn": functools.partial(cancel_turn_answer, parts.processor),  # Ctrl-C, attached (496)
                    "status": functools.partial(status_answer, parts.commands),  # `klaw status` (decision 510)
                    "nobody_can_answer": functools.partial(_nobody_can_answer, parts),  # a piped chat's question (516)
                    "piped": functools.partial(_piped, parts),  # its questions end when it closes (521)
                    "schedule": functools.partial(schedule_answer, parts.scheduler),  # `klaw schedule` beside it (526)
                    "running_tool": functools.partial(_running_tool, parts),  # an attached terminal's spinner (527)
                }
                if config_file is not None:
                    extra["config_file"] = config_file.answer  # `klaw config check`: does the engine need a restart?
                queries = EngineQueries(
                    parts.memory.store,
                    parts.processor.context_history,
                    messages,
                    parts.memory.settings,
                    extra=extra,
                    approvals=parts.approvals,
                )
                await parts.socket.start(_FrameAdapter(engine), queries.answer)
            # Recent chats' vectors into memory (one pass), after the socket opens: start-up time must not
            # grow with chats x vectors; a turn meanwhile waits for, or loads, its own chat's vectors.
            engine.warming = asyncio.create_task(_warm_vector_cache(parts.memory.store), name="warm-vector-cache")
            lifetimes.push_async_callback(_finish, engine.warming)  # one database call; let it end
            if isinstance(parts.memory.store, SqliteStore):  # merges the full-text index (decision 251)
                processor = engine.processor
                parts.memory.store.db.set_one_turn(_one_turn(processor, parts.scheduler.runner))  # decision 533
                upkeep = FullTextUpkeep(parts.memory.store.db, busy=lambda: processor.turns_under_way > 0)
                upkeep.start()
                lifetimes.push_async_callback(upkeep.stop)
        except BaseException:
            await lifetimes.aclose()
            raise
        return engine

    async def let_go(self) -> None:
        """Close the parts without a drain, from another loop than the one the engine ran on, which has closed (a
        program's `asyncio.run` per call, decision 538: its tasks were cancelled with it, so nothing is in flight).
        What was bound to the dead loop fails to close (the last such error is raised, after every part had its
        turn) and is left to the process's end; the home's lock, given back last, is let go."""
        await self._lifetimes.aclose()

    async def submit(self, chat: ChatRef, text: str, message_id: str | None = None) -> SubmitResult:
        """Text from a person: a slash command is answered at once, anything else is accepted. Raises
        `MessageRefused` (nothing stored) for text no log can hold or longer than `MAX_MESSAGE_CHARS`."""
        _refuse_task_channel(chat)
        check_message(text)
        command = parse_command(text)
        if command is not None:
            answer = await self.commands.answer(chat, command.name, command.args, command_id=message_id)
            if not answer.skill_call:  # `/skill args` is a message: the turn's context fills the skill (529)
                return SubmitResult(command_reply=answer.text, erased=answer.erased)
        stored = await self.processor.handle_inbound(Inbound(chat, text, message_id))
        self.approvals.heard(chat)  # a question after this message may be answered by a bare /approve
        return SubmitResult(message_id=stored.record.id)

    async def cancel_turn(self, chat: ChatRef) -> bool:
        """Ctrl-C in an in-process `klaw chat` (turn_cancel.py, as the socket's `cancel_turn` query): what `chat`
        has under way stopped, told as cancelled; False when nothing was."""
        return await cancel_turn(self.processor, chat)

    async def embed_what_waits(self, limit_seconds: float = ONE_MESSAGE_EMBED_SECONDS) -> None:
        """Wait (at most `limit_seconds`) for the embedding queue to embed every job due now: a piped chat's
        message and reply once the reply is out, so the next piped chat's search finds their vectors as it
        did when they were made before the turn (decision 499); what is left stays queued for the next start.
        At once when the worker is off (`/embeddings off`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit_seconds):
                await self.embedding_queue.wait_idle()

    async def _drain_runs(self, timeout_seconds: float) -> bool:
        if self.scheduler is None:
            return True
        return await self.scheduler.runner.drain(timeout_seconds, self._deadline)

    def quit_at_once(self) -> None:
        """End the shutdown's wait for the turns in flight now (a second Ctrl-C): they are cancelled as at
        its timeout, and their accepted messages are answered at the next start."""
        self._deadline.now()

    async def shutdown(self, timeout_seconds: float = SHUTDOWN_TIMEOUT_SECONDS) -> None:
        """Stop taking work, finish the turns in flight, then say goodbye and close.

        The `shutdown` frame goes out only after the drain: a gateway may disconnect as soon as it
        reads it, and the replies produced while draining must reach it first. Connections stay
        open during the drain; inbound frames then get an error (not stored, send again later).
        """
        self.processor.stop_accepting()
        self.store.stopping()  # a database server out of reach is not waited for (decision 442)
        # A turn waiting for a question is cut, as at the drain's deadline: its message is answered again at the next
        # start, which asks again (decision 513); a question no turn of ours waits for is denied.
        self.approvals.close(self.processor.cut(self.approvals.waiting_chats()))
        if self.socket is not None:
            await self.socket.stop_accepting()
        if self.scheduler is not None:
            await self.scheduler.stop()  # fires nothing more; runs already started finish in the drain
        began = asyncio.get_running_loop().time()  # the drain's own clock (asyncio.timeout)
        if not all(
            await asyncio.gather(
                self.processor.drain(timeout_seconds, self._deadline), self._drain_runs(timeout_seconds)
            )
        ):
            waited = asyncio.get_running_loop().time() - began
            if self._deadline.hurried and waited < timeout_seconds:  # what happened, not the limit (decision 450)
                log.warning(
                    "shutdown: turns or task runs still running were cancelled when told to quit at once (a second"
                    " Ctrl-C), %.1f s into the wait",
                    waited,
                )
            else:
                log.warning("shutdown: turns or task runs still running after %.0f s were cancelled", timeout_seconds)
        if self.socket is not None:
            await self.socket.broadcast_shutdown("engine stopping")
        # After the drain (its replies queue jobs too): the parts close in reverse of their start
        # (scheduler, socket, summarizers, then the records still being written, those of cancelled turns
        # and stopped summarizers, then the embedding queue, model clients, embedder, store); what is
        # still pending stays in embedding_jobs for the next start.
        await self._lifetimes.aclose()


def _one_turn(processor: MessageProcessor, runs: SubagentRunner) -> Callable[[], bool]:
    """The store's "at most one turn in flight?" (decision 533): chat turns (a batch waiting for its chat's
    lock counts), messages being accepted or in their debounce, and task runs; asked before each read."""
    return lambda: processor.work_under_way + runs.under_way <= 1


async def _warm_vector_cache(store: Storage) -> None:
    if not isinstance(store, SqliteStore):
        return  # the in-memory vector cache is SQLite's; PostgreSQL searches in the server
    try:
        loaded = await store.vectors.warm_cache()
        log.info("vector cache warmed: %d chat(s)", loaded)
        await store.vectors.fill_floats()  # a float file started again is filled now (decision 534)
    except Exception as exc:  # only a slower first search: searches load their chat or read the table
        log.warning("could not warm the vector cache or fill its float file: %s", type(exc).__name__)


async def _forget_said(parts: Parts, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `forget` query (`klaw memory forget` beside this engine), and once it is carried out a notice
    in the chat saying so, marked `forgotten`: a channel keeping copies of the chat's messages (the web
    page's replayable events) drops them, as after a `/forget` typed there."""
    answer = await parts.commands.forget_answer(params)
    if "files_rewritten" in answer:
        channel, _, chat_id = str(answer["chat"]).partition(":")
        said = f"Forgotten with klaw memory forget: {answer['label']} ({answer['describe']})."
        await parts.delivery.deliver(Outbound(ChatRef(channel, chat_id), said, None, "notice", forgotten=True))
    return answer


async def _nobody_can_answer(parts: Parts, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `nobody_can_answer` query: a piped `klaw chat` attached here ends question `id` of its chat unrun, as
    the in-process one does (approval.py `nobody_can_answer`), so its turn goes on to the reply it waits for
    (decision 516). `ended` is false when the question no longer waited (answered elsewhere, timed out)."""
    chat, request_id = named_chat(params), params.get("id")
    if not isinstance(request_id, str) or not request_id:
        raise QueryError("name the question: id")
    ended = request_id in parts.approvals.waiting(chat)
    said = parts.approvals.nobody_can_answer(chat, request_id)
    return {"ended": ended, "said": said}


async def _piped(parts: Parts, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `piped` query, sent by a piped `klaw chat` before its message: once its connection closes (it was
    killed with its turn under way, or it is done), a question its chat's turns ask is ended as nobody can
    answer it, not left open for `tools.approvalTimeoutSeconds` (decision 521). The questions waiting now are
    not its own (a terminal left them, decision 441): they wait for a terminal as before."""
    chat, connection = named_chat(params), ASKING.get()
    if connection is None:
        raise QueryError("only a connection's query can say it is piped")
    before = set(parts.approvals.waiting(chat))
    under_way = functools.partial(parts.processor.has_under_way, chat)
    connection.on_close.append(functools.partial(parts.approvals.pipe_left, chat, before, under_way))
    return {"noted": True}


async def _running_tool(parts: Parts, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `running_tool` query: the oldest tool call under way in the chat's turn, with its own limit, so an
    attached terminal's spinner names it instead of the model (decision 527); `tool` None when none runs."""
    call = parts.tools.running_in(named_chat(params))
    if call is None or not call.running:
        return {"tool": None}
    seconds = time.monotonic() - call.started
    return {"tool": call.name, "seconds": seconds, "limit_seconds": call.limit_seconds, "limit_words": call.limit_words}


async def _finish(task: asyncio.Task[None]) -> None:
    await asyncio.gather(task, return_exceptions=True)


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
        # A whole message (a piped chat's, decision 520) starts its turn at once, as in process (decision 499),
        # unless the chat has work under way: then it waits as any message does.
        alone = frame.whole and not self._engine.processor.has_under_way(chat)
        result = await self._engine.submit(chat, frame.text, frame.id)
        if result.command_reply is not None:  # marked forgotten only when something was erased
            await self._engine.delivery.deliver(
                Outbound(chat, result.command_reply, frame.id, "notice", forgotten=result.erased)
            )
        elif alone:
            self._engine.processor.answer_now(chat)

    async def on_delivered(self, frame: DeliveredFrame) -> None:
        await self._engine.delivery.confirmed([frame.id])

    async def on_command(self, frame: CommandFrame) -> None:
        chat = ChatRef(frame.channel, frame.chat_id)
        _refuse_task_channel(chat)
        answer = await self._engine.commands.answer(chat, frame.command, frame.args, command_id=frame.id)
        if answer.skill_call:  # the gateway parsed `/skill args`: a message after all, as typed (529, 536)
            await self._engine.submit(chat, frame.text or f"/{frame.command} {frame.args}".rstrip(), frame.id)
            return
        await self._engine.delivery.deliver(Outbound(chat, answer.text, frame.id, "notice", forgotten=answer.erased))
