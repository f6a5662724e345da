"""klaw as a Python library: an engine opened on a home, asked questions, closed.

    async with Klaw("~/klaw-home", model=my_model, tools=[my_tool]) as agent:
        reply = await agent.ask("alice", "what did we decide about the garden?")

`Klaw` is the whole engine of `klaw engine` (log, database, memory, tools, scheduled tasks), started
without the socket unless `listen=True`, so a program can hold conversations with long-term memory
without running a server. `ask` goes the way every message goes (stored durably, a turn with its
context, the tool loop, the reply recorded) and returns the reply's text; only the debounce wait is
skipped, since a call is one whole message, not a burst being typed. A failed turn raises
`TurnFailed` with the text the person would have read (it names the error id in the log), its
`error_id` and its `cause`, the exception that ended it (decision 293). A tool held
by `tools.approval` is asked of the `approve` callback (the question's text, as a person would read it);
without one (or when it raises) the call is not run, at once, and the model reads that nobody was asked
(decision 538). What a person could see of
a chat is read back with `history`, `turns`, `sessions`, `search_memory` (the hits and scores of
`klaw memory search`), `saved_memories` and `core_memory`; `tools` lists what the chat's model is
offered (and what is not, and why).
Decision: docs/decisions/092-library-api.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from klaw.config import EngineConfig
from klaw.engine.chat_reading import DEFAULT_LIMIT, HistoryEntry, MemoryFound, SessionInfo, TurnState
from klaw.engine.clock import Clock
from klaw.engine.delivery import Outbound, TextSink
from klaw.engine.runtime import Engine
from klaw.engine.socket_file import EngineAlreadyRunningError
from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.home_lock import program_config
from klaw.library_approval import Approve, answer_approval
from klaw.library_arguments import (
    LIBRARY_CHANNEL,
    callback_of,
    chat_of,
    clock_of,
    embedder_of,
    flag_of,
    home_of,
    limit_of,
    model_of,
    query_of,
    session_of,
    tools_of,
)
from klaw.library_loop import StartLoop, let_go
from klaw.library_notices import not_taken, warn_overridden
from klaw.library_open import noted_closed, noted_open, opened, refused_start
from klaw.library_own_turn import AskChains, OwnTurnRunning
from klaw.library_start import prepared
from klaw.library_stream import Reader, ReplyStream, StreamReaders
from klaw.library_tasks import ForgetAndRunTask
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.protocol import ChatModel
from klaw.llm.router import ModelRouter
from klaw.memory.embedder.checked import probe
from klaw.memory.embedder.protocol import Embedder
from klaw.store.records import ChatRef
from klaw.tools.inventory import ToolRow
from klaw.tools.running_call import running_chat
from klaw.tools.schema import ToolFunction

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentMessage:
    """A message the agent sent on its own, answering no `ask`: a subagent's or a scheduled task's
    answer (`task` names it), a message written in another chat (`sent_from` names that chat), a notice
    (a run that failed; an `ask` over the model's budget, decision 285), the reply of a turn resumed
    after a restart, or of an `ask` that was cancelled. `kind` is `reply`, `notice` or `error`, as a
    channel would show it."""

    chat: ChatRef
    text: str
    kind: Literal["reply", "notice", "error"]
    task: str | None = None
    sent_from: str | None = None  # written in another chat (`message_send`): that chat, "web:main"


OnMessage = Callable[[AgentMessage], Awaitable[None]]


class TurnFailed(KlawError, RuntimeError):
    """The turn for an `ask` failed; the message is what a person would have read (with its error id).
    `error_id`: the id the engine's log lines name; `cause` (also `__cause__`): the exception that ended
    the turn, e.g. an `LlmConnectionError` (the server is down: worth retrying) or an `LlmBadRequestError`
    (a wrong model name: fix the config). Both None for an apology not from this engine's turn."""

    def __init__(self, message: str, *, error_id: str | None = None, cause: Exception | None = None) -> None:
        super().__init__(message)
        self.error_id = error_id
        self.cause = cause


class EngineNotOpen(KlawError, RuntimeError):
    """The agent was used before `start` or after `aclose`: the message says which, and how to open it."""


class Klaw(ForgetAndRunTask):
    """The whole klaw engine inside a Python program: open it on a home (`async with Klaw(home) as
    agent`), `await agent.ask(chat, text)` for a reply, read a chat back (`history`, `turns`,
    `sessions`, `search_memory`, `saved_memories`, `core_memory`) and its `tools`, close it by leaving the block.
    Bring your own model, embedder and tools, or use what the home's engine.yaml configures
    (docs/library.md)."""

    def __init__(
        self,
        home: str | Path | KlawHome,
        *,
        config: EngineConfig | Mapping[str, Any] | None = None,
        model: ChatModel | None = None,
        embedder: Embedder | None = None,
        tools: Sequence[ToolFunction] = (),
        clock: Clock | None = None,
        listen: bool = False,
        approve: Approve | None = None,
        on_message: OnMessage | None = None,
    ) -> None:
        """`home`: the KLAW_HOME (created with the default workspace files if missing). `config`: an
        `EngineConfig`, its engine.yaml shape as a mapping, or None to read the home's engine.yaml
        (defaults when there is none). `model`: a `ChatModel` answering for every configured model id
        (e.g. `FunctionModel`), instead of the configured HTTP clients; the program's, left open when the
        agent closes, so it can answer for another `Klaw` afterwards (decision 365). `embedder`: instead of the
        configured one. `tools`: plain typed functions with docstrings (`async def`, or a `def` run in a
        worker thread), offered beside the built-in groups. `clock`: the engine's time (a `ManualClock`
        in tests). `listen`: also open `engine.sock` for gateways, as `klaw engine` does. `approve`:
        asked whether a call of a tool held by `tools.approval` may run (True runs it); None leaves
        every such call unrun at once, the model told nobody was asked (decision 538). `on_message`:
        `async def on_message(message: AgentMessage)`, given each message the agent sends on its own
        (a subagent's or task's answer), which no `ask` returns; without it they are only in `history`."""
        self.home = home_of(home)
        self._config = config
        self._model = model_of(model)
        self._embedder = embedder_of(embedder)
        self._tools: tuple[ToolFunction, ...] = tools_of(tools)  # type: ignore[assignment]  # callables, checked
        self._clock = clock_of(clock)
        self._listen = flag_of("listen", listen)
        self._engine: Engine | None = None
        self._closed = False  # `aclose` ran: the error says "closed", not "not started"
        self._closing: asyncio.Future[None] | None = None  # an `aclose` finishing the turns in flight
        self._waiting: dict[ChatRef, list[tuple[str, asyncio.Future[Outbound]]]] = {}
        self._approve: Approve | None = callback_of("approve", approve)  # type: ignore[assignment]
        self._on_message: OnMessage | None = callback_of("on_message", on_message)  # type: ignore[assignment]
        self._answering: set[asyncio.Task[None]] = set()
        self._chains = AskChains()  # which chat's tool waits for which chat's turn (decision 331)
        self._readers = StreamReaders()  # the `stream`s waiting for their turn's pieces (decision 455)
        self._loop = StartLoop()  # the event loop the engine lives on: another's call is refused (decision 538)

    @property
    def engine(self) -> Engine:
        """The running engine (its parts, for what this class does not offer)."""
        if self._engine is None:
            raise EngineNotOpen(
                "the engine is closed (by `await agent.aclose()` or the end of its `async with` block): use"
                " the agent inside the block, or open it again with `await agent.start()`"
                if self._closed
                else "the engine is not started: open it with `async with Klaw(home) as agent:` or"
                " `await agent.start()` before using it"
            )
        self._loop.refuse(self.home)  # asyncio.run per call: each a new loop, the engine's closed (decision 538)
        return self._engine

    @staticmethod
    def opened(home: str | Path | KlawHome) -> Klaw | None:
        """This program's started `Klaw` on `home`, or None: the one a notebook cell run twice lost (decision 513)."""
        found: Klaw | None = opened(home_of(home))
        return found

    async def start(self) -> Klaw:
        """Start the engine (`async with` calls it). It returns once each MCP server `tools.enabled` names
        has started or failed (up to its `startTimeoutSeconds`), unless `mcp.startWaitSeconds` is set:
        then it waits at most that long, and a server slower than that joins later (decision 291)."""
        if self._engine is not None:
            self._loop.refuse(self.home)
            return self
        config, config_file = prepared(self.home, self._config)
        await probe(self._embedder)  # a program's embedder answering no contract vectors: said now (decision 538)
        # The first `ask` has the MCP servers' tools: start-up waits until each has started or failed, as
        # a piped chat's one turn does, unless mcp.startWaitSeconds is set (decision 291).
        config = config.model_copy(update={"mcp": config.mcp.waiting_until_started()})
        router = None
        if self._model is not None:
            model = self._model
            # the program's: left open at close, so it can answer for another Klaw (decision 365)
            router = ModelRouter(ModelCatalogue.from_config(config), factory=lambda _id, _config: model, lent=True)
        try:
            with program_config() if self._config is not None else contextlib.nullcontext():
                # the library's channel given before recovery: a reply sent again at start reaches us
                self._engine = await Engine.start(
                    self.home, config, clock=self._clock, listen=self._listen, router=router,
                    embedder=self._embedder, tools=self._tools, channels={LIBRARY_CHANNEL: self._deliver},
                    config_file=config_file,
                )  # fmt: skip
        except EngineAlreadyRunningError as exc:
            raise await refused_start(self.home, exc) from None
        noted_open(self.home, self)
        self._loop.started()
        self._engine.delivery.stream_in_process(LIBRARY_CHANNEL, self._pick_stream)
        # an `ask` in another channel's chat (web:main) takes its own replies, not the channel (decision 465)
        self._engine.delivery.answer_asks(self._asked, self._deliver, self._pick_stream)
        self._closed = False
        if self._config is not None:
            warn_overridden(self._engine)
        return self

    async def ask(self, chat: str | ChatRef, text: str) -> str:
        """Send `text` as the person of `chat` (a name, `channel:chat_id`, or a `ChatRef`) and return the
        reply once the turn ends. A slash command (`/status`) is answered at once. Raises `TurnFailed`
        (with the turn's `error_id` and `cause`) when the turn fails, and
        `MessageRefused` (nothing stored) for text that cannot be a message: empty, too long, or not
        Unicode. Cancelled (a timeout) once the message is stored, the turn still runs to its end and its
        reply goes to `on_message` (decision 249)."""
        return await self._ask(chat, text, None)

    def stream(self, chat: str | ChatRef, text: str) -> ReplyStream:
        """`ask`, with the reply's text while the model writes it: `async for piece in agent.stream(chat,
        text)`, then `await stream.text()` for the reply as stored; the same errors (decision 455)."""
        return ReplyStream(lambda reader: self._ask(chat, text, reader))

    async def _ask(self, chat: str | ChatRef, text: str, reader: Reader | None) -> str:
        engine = self.engine
        ref, caller = chat_of(chat), running_chat()
        self._chains.refuse(caller, ref, text)  # what would wait for the turn waiting for this tool
        with self._chains.asking(caller, ref):
            try:
                result = await engine.submit(ref, text)
            except Exception as exc:  # a full disk or a folder made unreadable: said as the turn says it (466)
                if (said := not_taken(engine.home.root, exc, text)) is None:
                    raise
                raise TurnFailed(said, cause=exc) from exc
            if result.command_reply is not None:
                return result.command_reply
            assert result.message_id is not None
            reply: asyncio.Future[Outbound] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(ref, []).append((result.message_id, reply))
            with self._readers.reading(result.message_id, reader):
                engine.processor.answer_now(ref)
                outbound = await reply
        if outbound.kind == "error":
            raise TurnFailed(outbound.text, error_id=outbound.error_id, cause=outbound.cause) from outbound.cause
        return outbound.text

    async def history(
        self, chat: str | ChatRef, *, limit: int = DEFAULT_LIMIT, session: int | None = None
    ) -> list[HistoryEntry]:
        """The last `limit` messages of the chat's current session (since its last `/new`), or of
        `session` (an id from `sessions`), oldest first."""
        return await self.engine.chats.history(chat_of(chat), limit=limit_of(limit), session=session_of(session))

    async def turns(self, chat: str | ChatRef, *, session: int | None = None) -> list[TurnState]:
        """The turns of the current session (or of `session`), oldest first, each `completed`, `failed`,
        `tool_limit`, `open` or `interrupted` (cut off by a crash, its message answered by a later turn)."""
        return await self.engine.chats.turns(chat_of(chat), session=session_of(session))

    async def sessions(self, chat: str | ChatRef) -> list[SessionInfo]:
        """The chat's sessions, oldest first (the last is the current one)."""
        return await self.engine.chats.sessions(chat_of(chat))

    async def search_memory(
        self, chat: str | ChatRef, query: str, *, limit: int = 5, session: int | None = None
    ) -> list[MemoryFound]:
        """The chat's earlier messages (every session, or `session`) that best match `query`, best first,
        with the hits and scores `klaw memory search --chat <chat> --segment all` prints (hybrid search,
        no relevance gate: `distance` and `fts_rank` say why each was found)."""
        return await self.engine.chats.search_memory(
            chat_of(chat), query_of(query), limit=limit_of(limit), session=session_of(session)
        )

    async def saved_memories(self, chat: str | ChatRef, query: str, *, limit: int = 5) -> list[MemoryFound]:
        """The memories the agent saved in the chat (`memory_save`) that best match `query`, best first."""
        return await self.engine.chats.saved_memories(chat_of(chat), query_of(query), limit=limit_of(limit))

    async def core_memory(self) -> dict[str, Any]:
        """Core memory: the facts about the person kept in every context."""
        return await self.engine.chats.core_memory()

    async def tools(self, chat: str | ChatRef) -> list[ToolRow]:
        """The tools the chat's model is offered on its next turn, each with its source and whether it
        waits for approval; then those asked for but not offered, groups that failed to load (a plugin),
        MCP servers not serving, and the skills: each with why and what to do (`klaw tools`, `/tools`)."""
        return (await self.engine.tool_listing.inventory(chat_of(chat))).rows

    async def aclose(self) -> None:
        """Finish the turns in flight and close everything (the engine's graceful shutdown). A second
        `aclose` while one runs waits for it: it used to find the engine gone and cancel the asks whose
        turns the first was still finishing."""
        if running_chat() is not None and self._engine is not None:
            raise OwnTurnRunning(
                "a tool cannot close the engine from inside a tool: closing finishes the turns in flight,"
                " and the tool's turn waits for the tool; close it after `ask` returns (at the end of the"
                " `async with` block)"
            )
        if (gone := self._engine) is not None and self._loop.other():  # asyncio.run per call (decision 538)
            if not self._loop.closed():
                self._loop.refuse(self.home)  # another thread's loop runs it: closed there, not from here
            self._engine, self._closed = None, True
            noted_closed(self.home, self)
            await let_go(gone, self.home)
            return
        if self._closing is not None:  # another close is finishing the turns: this one ends with it (decision 443)
            await asyncio.shield(self._closing)
            return
        engine, self._engine = self._engine, None
        self._closed = True
        noted_closed(self.home, self)
        self._closing = asyncio.get_running_loop().create_future()
        try:
            if engine is not None:
                await engine.shutdown()
            for waiting in self._waiting.values():
                for _, future in waiting:
                    future.cancel()
            self._waiting.clear()
        finally:
            self._closing.set_result(None)
            self._closing = None

    async def __aenter__(self) -> Klaw:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _deliver(self, outbound: Outbound) -> None:
        """A reply answers each `ask` whose message its turn answered (`answers`: with engines sharing a
        database, a turn joins the chat's messages asked through any of them, decision 248) and every
        earlier one of the chat; a message sent on the agent's own (a task's answer) answers none and goes
        to `on_message`, awaited, so the engine counts it shown once the callback returns, and so does
        the reply to an `ask` that was cancelled (its turn went on). A question
        to approve a tool is answered by the `approve` callback, in a task of its own (the engine's
        approval timeout still bounds a callback that never returns)."""
        if outbound.approval is not None:
            task = asyncio.create_task(self._answer_approval(outbound.chat, outbound.approval, outbound.text))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
            return
        waiting = self._waiting.get(outbound.chat, [])
        answers = {outbound.reply_to, *outbound.answers}  # a turn joined them, asked here or elsewhere
        matched = [i for i, (message_id, _) in enumerate(waiting) if message_id in answers]
        if not matched:
            await self._tell(outbound)
            return
        answered = matched[-1] + 1
        awaited = [future for _, future in waiting[:answered] if not future.done()]
        del waiting[:answered]
        for future in awaited:
            future.set_result(outbound)
        if not awaited:  # every `ask` it answers was cancelled (a timeout): on its own, as decision 249 says
            await self._tell(outbound)

    def _pick_stream(self, chat: ChatRef, reply_to: str | None) -> TextSink | None:
        """Where the pieces of the turn answering `reply_to` go: the `stream`s waiting for it, if any."""
        return self._readers.pick(self._asked(chat), reply_to)

    def _asked(self, chat: ChatRef) -> list[str]:
        """The chat's messages whose reply an `ask` waits for (or gives `on_message`: it was cancelled)."""
        return [message_id for message_id, _ in self._waiting.get(chat, [])]

    async def _tell(self, outbound: Outbound) -> None:
        """A message on the agent's own to the `on_message` callback; its failure is logged (by type,
        never the text) and does not fail the turn or run that sent it."""
        if self._on_message is None:
            return
        try:
            message = AgentMessage(outbound.chat, outbound.text, outbound.kind, outbound.task, outbound.sent_from)
            await self._on_message(message)
        except Exception as exc:
            log.warning(
                "the library's on_message callback raised %s; the message stays in the chat's history",
                type(exc).__name__,
            )

    async def _answer_approval(self, chat: ChatRef, request_id: str, question: str) -> None:
        await answer_approval(self._engine, self._approve, chat, request_id, question)
