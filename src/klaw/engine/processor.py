"""The message processor: inbound → log and database → debounce → turn (context → LLM slot: tool loop → reply).

An inbound message is durable (log fsync'd, row stored) before anything else happens, then its
chat's debounce timer restarts. When the chat goes quiet, the pending messages are joined and the
turn builds the context, runs the tool loop in an interactive LLM slot, records the reply, closes
the exchange and delivers the reply. The slot is held by the tool loop alone (the model's calls and
the tools between them): another chat's model call does not wait for this chat's context reads or
its reply's fsync and delivery (decision 253). The turn itself runs in the shared `TurnRunner`
(turn_runner.py), whose one failure policy makes any failure a failed exchange and a short apology
with an error id, never silence and never a crash of the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from klaw.config import EngineConfig
from klaw.engine.answered_elsewhere import RESUME_WITHIN, pass_on_elsewhere, still_unanswered
from klaw.engine.approval import PERSON_PRESENT
from klaw.engine.chat_leases import ChatLeases
from klaw.engine.chat_reply import ChatReply
from klaw.engine.clock import Clock
from klaw.engine.context_builder import BuiltContext, ContextBuilder
from klaw.engine.context_history import ContextHistory, TurnContext
from klaw.engine.debounce import Debouncer
from klaw.engine.delivery import Delivery, kept_reply
from klaw.engine.drain_deadline import DrainDeadline
from klaw.engine.intake import Intake, drain
from klaw.engine.message_budget import OverBudget, no_note
from klaw.engine.resuming import Resuming
from klaw.engine.sessions import SessionManager
from klaw.engine.slots import LlmSlots, Priority
from klaw.engine.stopped_turns import (
    Batch,
    LockWait,
    Stopped,
    StoppedBatch,
    close_stopped,
    forget_checkpoint,
    tell_stopped,
)
from klaw.engine.turn_runner import Turn, TurnPrompt, TurnRunner
from klaw.engine.turn_timing import PhaseTimes
from klaw.memory.ingestion import Ingestion
from klaw.memory.turn_gate import QueuedMessages
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, Role, StoredMessage

log = logging.getLogger(__name__)

Once = tuple[str, datetime]  # an id and a time it is not older than: `inject` records it once


@dataclass(frozen=True)
class Inbound:
    chat: ChatRef
    text: str
    id: str | None = None


@dataclass(eq=False)
class MessageProcessor:
    """`leases`: on a store several engines share, a chat's turn runs only under its lease."""

    _: KW_ONLY
    config: EngineConfig
    store: Storage
    ingestion: Ingestion
    sessions: SessionManager
    context_builder: ContextBuilder
    turns: TurnRunner
    slots: LlmSlots
    delivery: Delivery
    clock: Clock
    leases: ChatLeases | None = None
    # an accepted message's vector started before its turn needs it (assembly.prepare_vector)
    prepare_vector: Callable[[MessageRecord], None] | None = None
    over_budget: OverBudget = no_note  # what to say first: the turn's messages alone over the model's budget
    last_context: dict[ChatRef, BuiltContext] = field(default_factory=dict, init=False)
    # the last turns per chat, for the web inspector
    context_history: ContextHistory = field(default_factory=ContextHistory, init=False)
    _debouncer: Debouncer[ChatRef, StoredMessage] = field(init=False)
    _turn_tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _intake: Intake = field(default_factory=Intake, init=False)  # whether messages are taken, which are now
    _chat_locks: dict[ChatRef, asyncio.Lock] = field(default_factory=dict, init=False)
    _queued: QueuedMessages = field(init=False)  # rowids waiting for, or in, their turn: the gate's (decision 497)
    resuming: Resuming = field(init=False)  # after a crash: unanswered messages queued, replies sent again
    _answered_here: set[int] = field(default_factory=set, init=False)  # queued, answered by an earlier turn here
    # rowid → its accept's time, until its turn reads it
    _accept_seconds: dict[int, float] = field(default_factory=dict, init=False)
    _running: dict[ChatRef, asyncio.Task[None]] = field(default_factory=dict, init=False)  # a chat's turn under way
    _stopped: set[asyncio.Task[None]] = field(default_factory=set, init=False)  # turns `turn_stopped` cancelled
    _halted: dict[ChatRef, list[StoppedBatch]] = field(default_factory=dict, init=False)  # their batches, closed
    # batches out of their debounce, waiting for the chat's turn lock (a turn runs): `turn_stopped` stops them too
    _lock_waiting: dict[ChatRef, list[LockWait]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._debouncer = Debouncer(self.config.processing.debounce_ms / 1000, self._process, self.clock)
        self._queued = self.ingestion.turns.queued  # no embedding pass while one waits (decision 497)
        self.resuming = Resuming(self.store, self.delivery, self.clock, self._queue, self._queued)

    @property
    def waiting_chats(self) -> int:
        return self._debouncer.waiting_chats

    @property
    def turns_under_way(self) -> int:
        """Chat turns started and not ended (building a context, in the model, writing the reply)."""
        return len(self._turn_tasks)

    @property
    def work_under_way(self) -> int:
        """Turns under way, chats whose messages wait in their debounce, messages being accepted: what the
        store's "at most one turn in flight?" counts (decision 533)."""
        return len(self._turn_tasks) + self._debouncer.waiting_chats + self._intake.under_way

    async def handle_inbound(self, inbound: Inbound) -> StoredMessage:
        """Make the message durable and schedule its chat's turn; returns once it is stored."""
        with self._intake.taking(), self.ingestion.turns.accepting():  # until `_queue`: no embedding pass between
            return await self._accept_and_queue(inbound)

    async def _accept_and_queue(self, inbound: Inbound) -> StoredMessage:
        record = MessageRecord(inbound.chat, Role.USER, inbound.text, created_at=self.clock.now())
        if self.prepare_vector is not None:
            self.prepare_vector(record)  # computed while the log is fsync'd, taken by the turn and the queue
        accepting = PhaseTimes()
        with accepting.phase("accept"):
            if not inbound.id:
                stored = await self.ingestion.accept(record)
            else:
                record = dataclasses.replace(record, id=inbound.id)
                stored, new = await self.ingestion.accept_once(record, same_text=True)
                if not new:
                    return stored  # a replayed message (gateway reconnect): already accepted
        self._accept_seconds[stored.rowid] = accepting.seconds["accept"]
        self._queue(inbound.chat, stored)
        return stored

    def _queue(self, chat: ChatRef, message: StoredMessage) -> None:
        """Into the chat's debounce; remembered until its turn ends (see `Resuming.resume_unanswered`)."""
        self._queued.add(message.rowid)
        self._debouncer.add(chat, message)

    async def _process(self, chat: ChatRef, pending: list[StoredMessage]) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._turn_tasks.add(task)
        waiting = LockWait(pending)
        self._lock_waiting.setdefault(chat, []).append(waiting)
        try:
            # One turn at a time per chat: messages arriving mid-turn form the next turn, so replies
            # and tool-call records of a chat never interleave; across engines, under the chat's lease.
            async with self._chat_lock(chat):
                self._left_lock_queue(chat, waiting)
                if waiting.stopped:
                    return  # a `/forget` took it while it waited: closed and answered there
                with self.ingestion.turns.turn(chat):  # the chat's summaries wait (decision 414)
                    await self._process_locked(chat, pending, task)
        finally:
            self._left_lock_queue(chat, waiting)
            self._unqueue(pending)
            if task is not None:
                self._turn_tasks.discard(task)

    def _unqueue(self, messages: list[StoredMessage]) -> None:
        """Out of `_queued` (and so of the embedding gate): their turn ended, or never will here."""
        for message in messages:
            self._queued.discard(message.rowid)
            self._accept_seconds.pop(message.rowid, None)

    def _left_lock_queue(self, chat: ChatRef, waiting: LockWait) -> None:
        queue = self._lock_waiting.get(chat, [])
        if waiting in queue:
            queue.remove(waiting)
        if not queue:
            self._lock_waiting.pop(chat, None)

    async def _process_locked(
        self, chat: ChatRef, pending: list[StoredMessage], task: asyncio.Task[None] | None
    ) -> None:
        """The batch's turn, under the chat's turn lock (and its lease, on a shared store)."""
        batch = Batch(pending)
        try:
            await self._run_stoppable(chat, batch, task)
            if self.leases is not None:
                turn = {m.rowid for m in batch.answering} | self._answered_here
                self._answered_here -= {m.rowid for m in pending}
                await pass_on_elsewhere(self.store, self.delivery, chat, [m for m in pending if m.rowid not in turn])
        finally:
            self._unqueue(batch.answering)

    async def _run_stoppable(self, chat: ChatRef, batch: Batch, task: asyncio.Task[None] | None) -> None:
        """The turn, which `turn_stopped` may cancel once it holds the chat's turn lock, its lease's wait too
        (decision 286): its exchange then closed as failed (opened first if need be), to be told by the forget."""
        if task is not None:
            self._running[chat] = task
        try:
            async with self._lease(chat):
                if self.leases is not None:
                    since = self.clock.now() - RESUME_WITHIN
                    batch.answering = await still_unanswered(self.store, chat, batch.pending, since)
                    # a later batch's messages this turn answers: not another engine's answer then
                    later = {m.rowid for m in batch.answering if m.rowid in self._queued}
                    self._answered_here |= later - {m.rowid for m in batch.pending}
                if batch.answering:
                    batch.sink = self._reply_sink(chat, batch.answering, turn=True)
                    await self._run_turn(chat, batch.answering, batch.sink)
                self._running.pop(chat, None)  # answered: not stopped while its lease is given back
        except asyncio.CancelledError:
            if task is None or task not in self._stopped:
                raise  # a shutdown past its deadline
            task.uncancel()
            if batch.answering:  # empty: another engine answered them all
                sink = batch.sink or self._reply_sink(chat, batch.answering)
                self._halted.setdefault(chat, []).append(await close_stopped(sink))
        finally:
            self._running.pop(chat, None)
            if task is not None:
                self._stopped.discard(task)

    def cut(self, chats: Collection[ChatRef]) -> list[ChatRef]:
        """Cancel the running turns of `chats` as a shutdown past its deadline does: their messages are answered
        again at the next start (a question open at a stop is asked again then, decision 513)."""
        running = [(chat, task) for chat in chats if (task := self._running.get(chat)) is not None]
        return [chat for chat, task in running if task.cancel()]

    def has_under_way(self, chat: ChatRef) -> bool:
        """Whether the chat has a turn running or messages waiting for theirs (what `turn_stopped` stops)."""
        return chat in self._running or chat in self._lock_waiting or self._debouncer.pending(chat) > 0

    @contextlib.asynccontextmanager
    async def turn_stopped(self, chat: ChatRef) -> AsyncIterator[Stopped]:
        """The chat with nothing under way for the block: the running turn cancelled and waited for (every
        record it was writing stored, `Ingestion.settled`), the batches waiting for the turn lock and the
        messages in debounce taken out, each batch's exchange closed as failed (stopped_turns.py); after the
        block each batch is told whether the block erased it (`Stopped.erased`). What `/forget` does
        (decisions 219, 277)."""
        running = self._running.get(chat)
        if running is not None:
            self._stopped.add(running)
            running.cancel()
        queued = self._lock_waiting.pop(chat, [])
        for waiting in queued:
            waiting.stopped = True  # its turn gives the lock up at once, never reaching the model
        batches = [w.messages for w in queued]
        if debounced := self._debouncer.take(chat):
            batches.append(debounced)
        try:
            async with self._chat_lock(chat):
                # after the running turn's close, oldest first: the last message's exchange is the latest
                for batch in batches:
                    self._unqueue(batch)
                    self._halted.setdefault(chat, []).append(await close_stopped(self._reply_sink(chat, batch)))
                await self.ingestion.settled()
                stopped = Stopped(self._halted.pop(chat, []))
                try:
                    yield stopped
                finally:
                    await tell_stopped(self.delivery, chat, stopped)
        finally:  # cancelled waiting for the lock: the batches taken out never hold the gate (decision 497)
            self._unqueue([message for batch in batches for message in batch])

    def _lease(self, chat: ChatRef) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext() if self.leases is None else self.leases.hold(chat)

    def _model_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """An interactive LLM slot around one model call of a turn: never its tools (a held tool's question
        waits for the person holding none), its context, or its reply's records (decisions 253, 297)."""
        return self.slots.hold(Priority.INTERACTIVE)

    def _reply_sink(self, chat: ChatRef, pending: list[StoredMessage], *, turn: bool = False) -> ChatReply:
        """`turn`: a turn's own (under its lease), which closes what a crash left open in the chat first."""
        answers, after_crash = tuple(m.record.id for m in pending), self.resuming.after_crash(chat) if turn else None
        return ChatReply(self.ingestion, self.delivery, self.clock, chat, answers[-1], answers, after_crash)

    async def _run_turn(self, chat: ChatRef, pending: list[StoredMessage], sink: ChatReply) -> None:
        """The chat's turn through the shared runner: its context, ingestion as recorder, this chat as sink;
        on a shared store, stopped by a forget any engine stores meanwhile (decision 286)."""
        # Accepting the messages (log fsync + row) happened before the turn: it is part of its cost.
        timings = PhaseTimes()
        timings.add("accept", sum(self._accept_seconds.get(m.rowid, 0.0) for m in pending))

        async def context() -> TurnPrompt:
            with timings.phase("context.session"):
                session = await self.sessions.get_or_create(chat)
            built = await self.context_builder.build(session, pending)
            await sink.note(self.over_budget(pending, session.model), *built.notices)  # before the model is asked
            timings.merge(built.timings, "context.")
            self.last_context[chat] = built
            self.context_history.record(
                chat,
                TurnContext.of(
                    built,
                    at=self.clock.now(),
                    reply_to=sink.reply_to,
                    model=session.model,
                    segment_id=session.segment.id,
                    timings=timings,
                ),
            )
            return TurnPrompt(built.messages, built.tools, session.model)

        turn = Turn(
            label=f"turn of chat {chat}",
            chat=chat,
            context=context,
            record=self.ingestion.accept_together,
            sink=sink,
            on_text=self.delivery.delta_sink(chat, sink.reply_to),
            timings=timings,
            approval=PERSON_PRESENT,  # a held tool asks this chat's person
            model_slot=self._model_slot,
            begin_alongside_context=sink.after_crash is None,  # after a crash: never-approved results first (447, 466)
            checkpoint=forget_checkpoint(self.leases, self.store, chat, pending, sink.reply_to),
        )
        await self.turns.run(turn)

    async def inject(self, chat: ChatRef, text: str, metadata: dict[str, str], once: Once | None = None) -> None:
        """A message the agent sends on its own (a scheduled task's answer): recorded in the chat's log
        and window as an assistant message (`metadata` says where it came from), then delivered.
        `once` (its id, and a time it is not older than): not again if the chat holds it (decision 324).
        Under the chat's turn lock, never between a turn's tool call and results, nor inside an exchange
        a crash cut off (closed first)."""
        async with self._chat_lock(chat), self._lease(chat):
            await self.resuming.close_cut_off(self.ingestion, chat)
            if once is not None and once[0] in await self.store.messages.known_ids(chat, once[1]):
                return  # recorded before a crash: kept until a channel confirms it (decision 101)
            record = MessageRecord(chat, Role.ASSISTANT, text, metadata=dict(metadata), created_at=self.clock.now())
            record = record if once is None else dataclasses.replace(record, id=once[0])
            await self.ingestion.accept(record)
        # Under its record id: the store keeps it until a channel confirms it, as a turn's reply (sent_unasked).
        await self.delivery.deliver(kept_reply(record, None))

    async def post(self, chat: ChatRef, text: str, metadata: dict[str, str]) -> bool:
        """`inject` now if the chat is between turns (True), else in the background once its turn ends
        (False): a turn sending to a chat that is itself sending back would otherwise wait for each other.
        The background send counts as a turn in flight, so shutdown's drain waits for it."""
        if not self._chat_lock(chat).locked():
            await self.inject(chat, text, metadata)  # the free lock is taken without yielding
            return True
        task = asyncio.create_task(self._post_later(chat, text, metadata), name=f"post-{chat}")
        self._turn_tasks.add(task)
        task.add_done_callback(self._turn_tasks.discard)
        return False

    async def _post_later(self, chat: ChatRef, text: str, metadata: dict[str, str]) -> None:
        try:
            await self.inject(chat, text, metadata)
        except Exception as exc:  # a full disk: the sender was told it would go; say in the log it did not
            log.error("a message for %s was not recorded or delivered: %s", chat, type(exc).__name__)

    def _chat_lock(self, chat: ChatRef) -> asyncio.Lock:
        return self._chat_locks.get(chat) or self._chat_locks.setdefault(chat, asyncio.Lock())

    def stop_accepting(self) -> None:
        self._intake.open = False

    def answer_now(self, chat: ChatRef) -> None:
        """Start the chat's turn without waiting for its debounce (a library call is one whole message)."""
        self._debouncer.expire_now(chat)

    def abandon(self) -> None:
        """Forget the turns waiting for their debounce, for a start-up that failed after resuming."""
        self._intake.open = False
        self._debouncer.cancel_all()
        self._queued.clear()

    async def _flush_after_accepts(self) -> None:
        """The debounces flushed once every message accepted before `stop_accepting` is queued (intake.py)."""
        await self._intake.taken()
        await self._debouncer.flush_all()

    async def drain(self, timeout_seconds: float, deadline: DrainDeadline | None = None) -> bool:
        """Answer everything accepted (pending debounces now), waiting up to the timeout (or the
        `deadline` brought forward: a second Ctrl-C) for turns in flight; returns False if some were
        still running and were cancelled."""
        return await drain(self._flush_after_accepts, self._turn_tasks, timeout_seconds, deadline)
