"""A chat turn's sink (`TurnSink`): the exchange opened and closed by log records, the reply or the
apology delivered. Apart from the processor, which runs the turn; the sink is what it writes at each end."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from klaw.disk_trouble import full_words
from klaw.engine.clock import Clock
from klaw.engine.delivery import Delivery, Outbound
from klaw.engine.failures import is_disk_full, unreachable_database
from klaw.engine.interrupted_exchanges import close_interrupted
from klaw.engine.tool_loop import LoopOutcome
from klaw.engine.tools_used import tool_runs
from klaw.engine.turn_runner import TurnFailure, TurnStopped
from klaw.memory.ingestion import Ingestion
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.lease_fence import LeaseLostError
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, Role

log = logging.getLogger(__name__)

ROOM_RETRY_FIRST_SECONDS = 1.0  # a reply the full disk kept out of the database: tried again after this, doubling
ROOM_RETRY_MAX_SECONDS = 10.0  # up to this, for as long as the disk stays full (the gateway's backoff: decision 488)


@dataclass(eq=False)
class ChatReply:
    """A chat turn's sink: the exchange opened and closed by log records (store/exchange_records.py, so
    a database rebuilt from the log has the same exchanges), the reply or the apology delivered, and a
    note before them (the messages over the model's budget: engine/message_budget.py)."""

    ingestion: Ingestion
    delivery: Delivery
    clock: Clock
    chat: ChatRef
    reply_to: str
    answers: tuple[str, ...]
    # the chat's first turn since a start that found messages a crash left unanswered: the calls never approved
    after_crash: frozenset[str] | None = None
    _opened: MessageRecord | None = field(default=None, init=False)
    _opening: MessageRecord | None = field(default=None, init=False)  # being written: stored even if cancelled
    _closed: bool = field(default=False, init=False)
    _closing: MessageRecord | None = field(default=None, init=False)  # the close `finish` wrote

    async def begin(self) -> None:
        if self.after_crash is not None:  # the exchanges a crash left open, closed before this one opens (306)
            await close_interrupted(self.ingestion, self.chat, self.answers, self.clock.now(), self.after_crash)
        exchange_id = await self.ingestion.store.exchanges.reserve_id()
        record = self._opening = exchange_open_record(self.chat, self.reply_to, self.clock.now(), exchange_id)
        self._opened = (await self.ingestion.accept(record)).record

    async def note(self, *texts: str | None) -> None:
        """One notice in the chat while the turn goes on, answering no message: the `texts` that are not None,
        a paragraph each (none: nothing to say)."""
        if said := "\n\n".join(text for text in texts if text is not None):
            await self.delivery.deliver(Outbound(self.chat, said, None, "notice"))

    async def stopped(self) -> MessageRecord:
        """For a turn `/forget` stopped (decision 219): its exchange closed as failed, so its messages count
        as answered and no later start answers them again; opened first if the turn stopped before its
        opening was written (a batch still in debounce, or the few milliseconds before the opening).
        Returns the opening record. Waits for the accepts under way: one cancelled mid-write still lands."""
        await self.ingestion.settled()
        opened = self._opened
        if opened is None and self._opening is not None and await self.ingestion.stored(self._opening.id) is not None:
            opened = self._opening
        if opened is None:
            await self.begin()
            opened = self._opened
            assert opened is not None
        closing = self._closing  # `finish` stopped while its reply and close were written: they landed
        if not self._closed and (closing is None or await self.ingestion.stored(closing.id) is None):
            await self.ingestion.accept(exchange_close_record(opened, ExchangeStatus.FAILED, None, self.clock.now()))
        self._closed = True
        return opened

    async def finish(self, outcome: LoopOutcome) -> None:
        assert self._opened is not None
        now = self.clock.now()
        final = MessageRecord(self.chat, Role.ASSISTANT, outcome.text, created_at=now)
        # The reply and the close in one log write and one fsync: both durable before the reply goes out.
        close = self._closing = exchange_close_record(self._opened, outcome.status, final.id, now)
        try:
            await self.ingestion.accept_together([final, close])
        except Exception as exc:
            if not (is_disk_full(exc) and self.ingestion.logged_not_stored(final.id)):
                raise
            await self._stored_once_there_is_room([final, close])
        self._closed = True
        await self.delivery.deliver(
            Outbound(
                self.chat,
                outcome.text,
                self.reply_to,
                "reply",
                id=final.id,
                answers=self.answers,
                tools=tool_runs(outcome.tool_names, dict(outcome.not_run)),
            )
        )

    async def _stored_once_there_is_room(self, records: list[MessageRecord]) -> None:
        """The reply and its close, which the log took and the full database refused, stored from their logged
        lines once there is room, while the engine runs (the next start's recovery stored them before, and the
        person read an apology for an answer that existed: adv28b, decision 500). The person is told once that
        the answer waits; tried again after a backoff (at most `ROOM_RETRY_MAX_SECONDS`) for as long as the disk
        stays full, as the gateway does for a message (decision 488). Another failure meanwhile ends the turn as
        before; a shutdown meanwhile leaves them to the next start, as before."""
        where = getattr(self.ingestion.log, "root", None)
        full = full_words(where, "then it is saved and sent here") if isinstance(where, Path) else "the disk is full"
        await self.note(f"Your answer is written but not saved yet: {full}")
        log.warning("chat %s: its reply waits for room to be stored (the disk is full); tried again", self.chat)
        wait = ROOM_RETRY_FIRST_SECONDS
        while True:
            await self.clock.sleep(wait)
            wait = min(wait * 2, ROOM_RETRY_MAX_SECONDS)
            try:
                await self.ingestion.accept_together(records)
            except Exception as exc:
                if not is_disk_full(exc):
                    raise
                continue
            log.warning("chat %s: its reply is stored now that there is room, and sent", self.chat)
            return

    async def fail(self, failure: TurnFailure) -> None:
        """Close the exchange as failed, then apologise; the apology goes out even when the close cannot
        be recorded (a full disk). Not closed again when `finish` closed it: stored before the delivery
        failed, or only logged (the database full after the log took the reply and the close: the log
        is the truth, the next start stores both and sends the reply, and a second close there would be
        a contradiction it ignores with a warning; decision 262). A turn whose chat's lease was lost
        says nothing: the engine now holding the chat answers it (decision 200). A turn stopped because a
        forget erased its exchange closes nothing (decision 286). A turn the database's server going away
        failed is closed as interrupted, not failed: its messages stay unanswered, and the engine's lease watch
        answers them once the server is back, as the apology promises (adversary28, decision 488)."""
        if isinstance(failure.error, LeaseLostError):
            return
        closed = self._closed or (self._closing is not None and self.ingestion.logged_not_stored(self._closing.id))
        closed = closed or (isinstance(failure.error, TurnStopped) and failure.error.erased)  # its exchange is gone
        opened = self._opened
        if opened is None and self._opening is not None and self.ingestion.logged_not_stored(self._opening.id):
            opened = self._opening  # the log took the opening, the full database not: it is open there (400)
        try:
            if opened is not None and not closed:
                away = unreachable_database(failure.error) is not None  # a close written once the server is back
                status = ExchangeStatus.INTERRUPTED if away else ExchangeStatus.FAILED
                close = exchange_close_record(opened, status, None, self.clock.now())
                await self.ingestion.accept(close)
        finally:
            await self.delivery.deliver(
                Outbound(
                    self.chat,
                    failure.apology(),
                    self.reply_to,
                    "error",
                    answers=self.answers,
                    error_id=failure.error_id,
                    cause=failure.error,
                )
            )
