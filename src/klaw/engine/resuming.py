"""After a crash: the messages left unanswered given their turn, the replies no channel confirmed sent again.

A message is durable (and acknowledged to its gateway) before its turn runs, and a reply is kept until a
channel confirms it (decision 101): a run that stopped in between leaves both behind. At start the engine
queues the unanswered messages of every chat and closes, in each such chat's next turn (or before a message
the agent sends there on its own: `close_cut_off`, decision 441), the exchanges the crash left open as
interrupted (decision 306), even when the messages are too old to answer (decision 325), each held call whose
approval question was open then written as never approved (open_questions.py, decision 447); on a store
several engines share it takes over the chats a dead engine served the same way; the replies no channel
confirmed are sent again (decisions 101, 324). Kept apart from the processor, which owns the turns
these feed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from datetime import timedelta

from klaw.engine.answered_elsewhere import RESUME_WITHIN, unanswered
from klaw.engine.clock import Clock
from klaw.engine.delivery import Delivery, redeliver
from klaw.engine.interrupted_exchanges import close_interrupted
from klaw.engine.open_questions import OpenQuestions
from klaw.log_format import LOG_FILE_ONLY
from klaw.memory.ingestion import Ingestion
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, StoredMessage

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Resuming:
    """`queue` puts a message into its chat's debounce; `queued` holds the rowids waiting for, or in, their
    turn (the processor's own set, so a message that arrived live is not queued twice)."""

    store: Storage
    delivery: Delivery
    clock: Clock
    queue: Callable[[ChatRef, StoredMessage], None]
    queued: Container[int]
    _after_crash: set[ChatRef] = field(default_factory=set, init=False)  # their next turn closes cut-off exchanges
    _again: dict[ChatRef, list[str]] = field(default_factory=dict, init=False)  # the ids queued to answer again
    noted: OpenQuestions = field(default_factory=lambda: OpenQuestions(None))  # the gate's (decision 447)

    async def resume_unanswered(self, within: timedelta = RESUME_WITHIN) -> int:
        """Give their turn to messages stored (and acknowledged to a gateway) but never answered because the
        engine stopped before or during their turn; returns how many. Unanswered = a user message of the
        chat's current segment newer than the user message of its last exchange that answered (not open, not
        interrupted), however many (they join one turn, as a burst would). A failed exchange counts as
        answered: the person saw the error. A message already waiting for its turn (arrived live) is not
        queued twice. The chat's next turn closes its open exchanges as interrupted (decision 306)."""
        resumed = 0
        by_chat: dict[ChatRef, list[StoredMessage]] = {}
        for message in await self.store.messages.unanswered():  # one read, not a few per chat (decision 477)
            by_chat.setdefault(message.record.chat, []).append(message)
        for chat, messages in by_chat.items():
            resumed += self._queue_unanswered(chat, messages, within)
        self.noted.keep_only(self._after_crash)  # what a kill -9 left open is in these chats alone (447)
        if resumed:
            # to the log file only: the chat shows each reply as one "to a message from before klaw last stopped",
            # and `klaw chat`'s "(klaw logged a warning: see …)" after a restart pointed at nothing new (473)
            log.warning("resuming %d message(s) left unanswered by the previous run", resumed, extra=LOG_FILE_ONLY)
        return resumed

    def queued_again(self) -> list[str]:
        """The ids of the messages this start queued to answer again (their replies' label, decision 535)."""
        return [message_id for ids in self._again.values() for message_id in ids]

    async def take_over(self, chat: ChatRef) -> None:
        """Queue the chat's unanswered messages (those not queued here already): another engine sharing
        the store accepted them and died, or released the chat before their turn."""
        if await self._resume(chat, RESUME_WITHIN):
            log.warning("taking over chat %s: messages no engine answered", chat, extra=LOG_FILE_ONLY)

    async def redeliver(self, within: timedelta = RESUME_WITHIN) -> int:
        """Send again the replies no channel confirmed younger than `within` (delivery.redeliver)."""
        return await redeliver(self.store, self.delivery, self.clock.now() - within)

    def after_crash(self, chat: ChatRef) -> frozenset[str] | None:
        """None, or the chat's next turn closes what a crash left open first, and these are the held calls
        whose question was open then (never approved, never run: decision 447); asked once by that turn."""
        cut_off = chat in self._after_crash
        self._after_crash.discard(chat)
        self._again.pop(chat, None)
        return self.noted.take(chat) if cut_off else None

    async def close_cut_off(self, ingestion: Ingestion, chat: ChatRef) -> None:
        """Close what a crash left open in the chat now, as its next turn would (under the chat's lock): a
        message the agent sends on its own (a task's answer noted before a kill, decision 432) goes in
        before that turn, and written before the close it sat inside the cut-off exchange, between its
        tool call and the result it never got (trial48), where an exchange's readers took it as the
        exchange's own. The messages this start queued to answer again are the turn's (decision 306)."""
        again = self._again.get(chat, [])
        if (never_approved := self.after_crash(chat)) is not None:
            await close_interrupted(ingestion, chat, again, self.clock.now(), never_approved)

    async def _resume(self, chat: ChatRef, within: timedelta) -> int:
        return self._queue_unanswered(chat, await unanswered(self.store, chat), within)

    def _queue_unanswered(self, chat: ChatRef, messages: list[StoredMessage], within: timedelta) -> int:
        cutoff = self.clock.now() - within
        resumed = 0
        for message in messages:
            self._after_crash.add(chat)  # the chat's open exchanges were cut off (decision 306)
            if message.record.created_at >= cutoff and message.rowid not in self.queued:
                self.queue(chat, message)
                self._again.setdefault(chat, []).append(message.record.id)
                resumed += 1
        return resumed
