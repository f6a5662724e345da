"""Accepting messages: the log first (durable), then the database, and recovery between the two.

The log is the source of truth. A message is appended to the log and fsync'd, then inserted into
the store. If the process dies in between, `recover()` at start-up replays the tail of every
chat's log into the store (the files written since the store's watermark: memory/log_recovery.py);
inserts are idempotent on message id, so replaying is always safe.
Records a `forget` tombstone names are never replayed (memory/forgetting.py).

Ingestion also decides which messages get embedded (`should_embed`): the store queues the job in
the same transaction as the row, and `on_embedding_queued` (the embedding queue's `notify`) wakes
the worker. Nothing here waits for an embedding.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path

from klaw.config import AutoRagConfig
from klaw.memory.conversation_log import ConversationLog, StoreKeptLog
from klaw.memory.embedding_policy import should_embed
from klaw.memory.log_oddities import over_cap, over_cap_words
from klaw.memory.log_recovery import RECOVERED_KEY, changed_files, watermark
from klaw.memory.turn_gate import TurnGate
from klaw.message_text import IdUsedForAnotherText, MessageRefused
from klaw.store.archival_records import tombstoned
from klaw.store.protocol import LogFirst, Storage
from klaw.store.records import MessageRecord, StoredMessage
from klaw.store.summaries.records import Summary

log = logging.getLogger(__name__)

# How `_accept_now` stores the records it logged: rows (after the log write), given their embed flags.
Append = Callable[[Sequence[MessageRecord], list[bool], LogFirst | None], Awaitable[list[StoredMessage]]]

# Log files from this long before a chat's newest stored message are replayed at start-up: long
# enough to cover a crash at midnight and clock skew, short enough to keep start-up fast.
RECOVERY_OVERLAP = timedelta(days=1)


class IdUsedByAnotherChat(MessageRefused):
    """A message or command whose id a record of another chat already has. Ids make a resend harmless
    (the same record again is acknowledged, not stored twice), so one id naming two chats' records
    would lose the second: it is refused for good, nothing stored, and the other chat never named."""

    def __init__(self, record_id: str) -> None:
        super().__init__(
            f"the id {record_id[:64]!r} is already used by another chat's message; "
            "ids must be unique across chats (e.g. a UUID)"
        )


class Ingestion:
    def __init__(
        self,
        log_: ConversationLog,
        store: Storage,
        *,
        min_embed_tokens: int | None = None,
        on_embedding_queued: Callable[[], None] | None = None,
        observers: Sequence[Callable[[StoredMessage], None]] = (),
        turns: TurnGate | None = None,
    ) -> None:
        """`min_embed_tokens` is `autoRag.minMessageTokens` (its default when None). `observers` are told
        of every record stored, live or recovered (the summarizers wake on a closed exchange); a list
        the assembly fills as it builds them is read at each append."""
        self.log = log_
        self.store = store
        self.min_embed_tokens = AutoRagConfig().min_message_tokens if min_embed_tokens is None else min_embed_tokens
        self.on_embedding_queued = on_embedding_queued
        self._observers = observers
        # Held by `/forget` from its plan to its rewritten log files, and by a writer of records derived
        # from others (summaries) while it checks that they still exist and appends: no derived record
        # about forgotten records can reach the log in between.
        self.exclusive = asyncio.Lock()
        # Records in the log whose store failed (until a retry stores them; recovery does at start-up).
        self._logged_not_stored: dict[str, MessageRecord] = {}
        # Accepts under way: each runs to its end even when its caller is cancelled (`settled`).
        self._in_flight: set[asyncio.Future[list[StoredMessage]]] = set()
        # Turns in flight, which a chat's summaries wait for before writing (turn_gate.py, decision 414)
        # and the embedding queue before a pass (decision 426).
        self.turns = TurnGate() if turns is None else turns
        self._recovered = False  # a close moves the watermark only after a start's recovery (decision 477)
        # The watermark as the store holds it (None: none yet, or a store that keeps its own log), and the
        # lock its lowering takes when the wall clock stepped back behind it (decision 486).
        self._agreed_ms: int | None = None
        self._lowering = asyncio.Lock()
        self._id_locks: dict[str, tuple[asyncio.Lock, int]] = {}  # `accept_once`'s, by id, with their users

    async def accept(self, record: MessageRecord) -> StoredMessage:
        """Make `record` durable in the log, then store it (queueing its embedding if it should
        have one); returns it with its rowid.

        If the log took a record and the store then failed (SQLITE_FULL on a full disk), the record
        is in the log: a retry with the same id (a gateway resending it) stores that logged record
        without appending it again, so the log keeps every record exactly once."""
        return (await self._accept([record]))[0]

    async def accept_together(self, records: Sequence[MessageRecord]) -> list[StoredMessage]:
        """`accept` for records written at the same moment (a turn's reply and the close of its
        exchange): one log write and one fsync for all of them (per day file), then one transaction.
        Every one is durable before any is stored, as with `accept` one by one, at the cost of one."""
        return await self._accept(records)

    async def accept_summary(self, record: MessageRecord) -> Summary | None:
        """`accept` for a summary record (`exchange_summary`, `segment_summary`): the summary its fold
        stored from it, read in the append's own call to the store (None: the fold kept nothing, e.g.
        a source forgotten meanwhile): one hop fewer than reading it back (decision 272)."""
        folded: list[Summary | None] = [None]

        async def append(
            logged: Sequence[MessageRecord], _embed: list[bool], write: LogFirst | None
        ) -> list[StoredMessage]:
            stored, folded[0] = await self.store.summaries.append_record(logged[0], log_first=write)
            return [stored]

        await self._accept([record], append)
        return folded[0]

    async def _accept(self, records: Sequence[MessageRecord], append: Append | None = None) -> list[StoredMessage]:
        """`_accept_now`, shielded: a caller cancelled (a turn `/forget` stops) never leaves a record in the
        log and not in the store, nor one the store takes after `settled` returned, which the forget that
        stopped the turn would not see (decision 219)."""
        accepting = asyncio.ensure_future(self._accept_now(records, append or self._append))
        self._in_flight.add(accepting)
        accepting.add_done_callback(self._in_flight.discard)
        accepting.add_done_callback(_seen)
        return await asyncio.shield(accepting)

    async def settled(self) -> None:
        """Return once every accept under way has ended (stored, or failed), those of cancelled callers too."""
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    async def _accept_now(self, records: Sequence[MessageRecord], append: Append) -> list[StoredMessage]:
        """The log write and the rows in one hop to the store's thread, which writes and fsyncs the
        lines before the rows' transaction (decision 211): a hop to a worker thread and back costs the
        event loop more than the write it carries. The order, and what is acknowledged when, is as
        before: nothing is stored before its line is durable, and nothing is returned before both."""
        fresh = [record for record in records if record.id not in self._logged_not_stored]
        logged = [self._logged_not_stored.get(record.id, record) for record in records]
        embed = [should_embed(record, self.min_embed_tokens) for record in logged]
        if fresh:
            await self._clock_not_behind()
        async with self.log.appending(fresh) as write:
            try:
                stored = await append(logged, embed, write)
            except BaseException:
                if write is None or write.done:  # in the log: a retry stores them without logging again
                    self._logged_not_stored.update((record.id, record) for record in fresh)
                raise
        for record in records:
            self._logged_not_stored.pop(record.id, None)
        self._stored(stored, any(embed))
        return stored

    async def _append(
        self, logged: Sequence[MessageRecord], embed: list[bool], write: LogFirst | None
    ) -> list[StoredMessage]:
        """The rows of `logged`, after `write` (the store's thread runs it first)."""
        messages = self.store.messages
        if len(logged) == 1:
            return [await messages.append(logged[0], embed=embed[0], log_first=write)]
        return await messages.append_many(logged, embed=embed, log_first=write)

    def logged_not_stored(self, record_id: str | None) -> bool:
        """Whether the record is in the log though its row is not (its store failed after the log took
        it): it happened, as far as the log goes, and a later start stores it (`recover`)."""
        return record_id is not None and record_id in self._logged_not_stored

    async def stored(self, record_id: str | None) -> StoredMessage | None:
        """The one "already stored?" rule: a record whose id the store holds was accepted before.
        Ids from outside make replays harmless: a gateway resends a message or command it is not
        sure reached us, and crash recovery replays the log (None: no id given, nothing stored)."""
        return None if record_id is None else await self.store.messages.get(record_id)

    async def accept_once(self, record: MessageRecord, *, same_text: bool = False) -> tuple[StoredMessage, bool]:
        """`accept`, unless a record with this id is already stored: then that one, neither logged
        nor stored again. Returns the stored record and whether it was accepted just now.
        `IdUsedByAnotherChat` when the stored one is another chat's: not a resend, a clash; with
        `same_text`, `IdUsedForAnotherText` when its words differ (decision 503). The look-up and the
        accept are one step under the id's lock: two frames under one id never both pass the look-up."""
        key = record.id or ""
        lock, users = self._id_locks.get(key, (asyncio.Lock(), 0))
        self._id_locks[key] = (lock, users + 1)
        try:
            async with lock:
                existing = await self.stored(record.id)
                if existing is None:
                    return await self.accept(record), True
        finally:
            lock, users = self._id_locks[key]
            if users == 1:
                del self._id_locks[key]
            else:
                self._id_locks[key] = (lock, users - 1)
        if existing.record.chat != record.chat:
            raise IdUsedByAnotherChat(key)
        if same_text and existing.record.content != record.content:
            raise IdUsedForAnotherText(key)
        return existing, False

    async def _store(self, record: MessageRecord) -> StoredMessage:
        embed = should_embed(record, self.min_embed_tokens)
        stored = await self.store.messages.append(record, embed=embed)
        self._stored([stored], embed)
        return stored

    def _stored(self, stored: Sequence[StoredMessage], embedded: bool) -> None:
        """Wake the embedding queue if a job was queued, and tell the observers of each record."""
        if embedded and self.on_embedding_queued is not None:
            self.on_embedding_queued()
        for message in stored:
            for observe in self._observers:
                observe(message)

    async def recover(self) -> int:
        """Store log records the database is missing (after a crash); returns how many. Only the files
        written since the store's watermark are read (memory/log_recovery.py, decision 477), then the
        watermark moves to the start of this recovery: nothing was logged meanwhile."""
        began = _now_ms()
        if isinstance(self.log, StoreKeptLog):  # no fold without its line: nothing to replay
            self._recovered = True
            return 0
        since = watermark(await self.store.settings.get(RECOVERED_KEY))
        recovered = 0
        if since is None:
            for chat_dir in self.log.chat_dirs():
                recovered += await self._recover_chat(self.log.files(chat_dir))
        else:
            known = {chat.log_dir_name for chat in await self.store.segments.chats()}
            for chat in await asyncio.to_thread(changed_files, self.log, since, known):
                recovered += await self._replay((await self.log.read(chat.files)).records)
        if recovered:
            log.warning("recovered %d messages from the conversation log into the database", recovered)
        await self._note_agreed(began)
        self._recovered = True
        return recovered

    async def close(self) -> None:
        """`settled`, then the watermark moved to now if every record logged is stored (none refused by
        the store and not retried): the next start reads no file this run wrote (decision 477). Not
        after a start whose recovery did not finish; a watermark the store cannot take is left as it was."""
        await self.settled()
        if self._recovered and not self._logged_not_stored:
            with contextlib.suppress(Exception):  # the store failing as it closes: the next start reads more
                await self._note_agreed(_now_ms())

    async def _note_agreed(self, at_ms: int) -> None:
        if not isinstance(self.log, StoreKeptLog):
            await self.store.settings.set(RECOVERED_KEY, at_ms)
            self._agreed_ms = at_ms

    async def _clock_not_behind(self) -> None:
        """Before a line is logged: a wall clock behind the stored watermark (stepped back since it was
        written: NTP correcting a Pi without a clock chip) lowers the watermark to now first, durably, so
        the line's file, whose mtime the same clock gives, is read at the next start if its row is lost.
        One comparison per accept; a settings write only after a step back (decision 486)."""
        if self._agreed_ms is None or _now_ms() >= self._agreed_ms:
            return
        async with self._lowering:  # a second accept meanwhile logs only once the lowered one is stored
            now = _now_ms()
            if self._agreed_ms is not None and now < self._agreed_ms:
                log.warning("the wall clock is behind the log's recovery watermark (stepped back?): lowered to now")
                await self._note_agreed(now)

    async def _recover_chat(self, files: list[Path]) -> int:
        """A chat recovered without a watermark: from a day before its newest stored message."""
        if not files:
            return 0
        # The newest file names the chat; a store that lacks the chat replays every file.
        newest = await self.log.read(files[-1:])
        if not newest.records:
            candidates = files
        else:
            latest = await self.store.messages.latest_created_at(newest.records[-1].chat)
            if latest is None:
                candidates = files
            else:
                cutoff = (latest - RECOVERY_OVERLAP).date().isoformat()
                candidates = [f for f in files if f.stem >= cutoff]
        # The newest file is read once: reading it again warned of each of its malformed lines twice.
        records = (await self.log.read([f for f in candidates if f != files[-1]])).records
        if files[-1] in candidates:
            records += newest.records
        return await self._replay(records)

    async def _replay(self, records: list[MessageRecord]) -> int:
        """Store the chat's `records` the store lacks: the ids it has since the oldest of them in one
        query, then the "already stored?" rule for the others alone (an id of another chat's row)."""
        forgotten = tombstoned(records)  # lines a crash kept from being removed by /forget
        for record in (r for r in records if over_cap(r)):  # typed into the log: no channel takes it (488)
            log.warning("not recovered: %s ('klaw log check' names it)", over_cap_words(record))
        wanted = [record for record in records if record.id not in forgotten and not over_cap(record)]
        if not wanted:
            return 0
        since = min(r.created_at for r in wanted) - timedelta(seconds=1)  # the store keeps milliseconds
        known = await self.store.messages.known_ids(wanted[0].chat, since)
        recovered = 0
        for record in wanted:
            if record.id not in known and await self.stored(record.id) is None:
                await self._store(record)
                known.add(record.id or "")
                recovered += 1
        return recovered


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _seen(accepting: asyncio.Future[list[StoredMessage]]) -> None:
    """A failed accept's error is its caller's; a caller cancelled meanwhile (a close past its drain) has
    gone, and asyncio printed "Task exception was never retrieved" with a traceback for each (adversary23,
    the database out of reach): what was accepted is stored, what was not is answered at the next start."""
    if not accepting.cancelled():
        accepting.exception()
