"""Forgetting an exchange, a segment or a saved memory: its text leaves the database, every index,
every summary that could quote it, and the conversation log.

1. Plan: the records that make up the target (`HistoryRepository`), refused if the target is not
   the given chat's (a person can only forget their own conversation). A saved memory's records
   are its `memory_saved` record and the memory_save tool calls (with their round's results) whose
   arguments hold its text; the conversation it came up in stays unless it is forgotten too.
2. The tombstone: a `forget` record naming the records' ids (never their text), and those of the
   summary records that retell them (`HistoryRepository.summary_records`), goes through
   ingestion like any record: appended to the log and fsync'd, then folded by the store, which
   deletes the rows, FTS entries, vectors, embedding jobs, exchanges, memory chunks and summaries
   in one transaction with secure delete (`store/sqlite/archival_fold.py`).
3. The log files that held the records are rewritten without their lines (atomic per file), and
   the store's WAL is emptied so no old page keeps the text.

Crash safety: the tombstone id is noted in `settings` (`PENDING_KEY`) before step 2 and dropped
after step 3. `finish_pending` redoes step 3 for any tombstone still noted: at start-up, and first in
`klaw memory forget` and `klaw reindex` (`klaw log check` names them; decision 454); a tombstone that
reached the log but not the database is folded by crash recovery, which, like `klaw reindex`, skips
every record a tombstone names. The engine drops its in-memory copies of recent contexts (`/forget`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from klaw.memory.forget_notes import PENDING_KEY, ForgetNotes, Left
from klaw.memory.forget_targets import WHERE_SHOWN, ForgetError, ForgetKind, resolve_memory, typed_target
from klaw.memory.segment_numbers import id_of_number, number_of, segment_words
from klaw.scheduling.names import ADD_TOOL, SPAWN_TOOL
from klaw.store.archival_records import forget_record
from klaw.store.exchange_records import NOT_ANSWERED_AGAIN
from klaw.store.records import ChatRef, Exchange, ExchangeStatus, MessageRecord, MessageType, Role, StoredMessage

if TYPE_CHECKING:  # `klaw memory forget` loads this module for ForgetKind; `klaw --help` must stay light
    from klaw.memory.ingestion import Ingestion
    from klaw.memory.migrated_copy import MigratedCopy

__all__ = ["PENDING_KEY", "ForgetError", "ForgetKind", "ForgetOutcome", "ForgetPlan", "Forgetting"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ForgetPlan:
    chat: ChatRef
    kind: ForgetKind
    target_id: int | str  # a memory's: its id as shown (`MemoryChunk.memory_id`)
    records: tuple[StoredMessage, ...]
    # A crash cut a turn off and the restart answered its messages again (decision 306): `answered_by` the
    # later exchange that keeps the messages this cut-off one's plan leaves; `cut_off` the exchanges the
    # later one's plan erases with them.
    answered_by: int | None = None
    cut_off: tuple[int, ...] = ()
    # A memory's plan erases the memory_save call and its result, not the person's message that asked for
    # it: `asked_in` the exchange that keeps that message, named in the answer with how to erase it.
    asked_in: int | None = None
    named: str = ""  # a segment as the page names it, `segment 1 (id 3)` (decision 402); `label` stays the id

    @property
    def label(self) -> str:
        return f"{self.kind.value} {self.target_id}"

    @property
    def said(self) -> str:
        return self.named or self.label

    @property
    def ids(self) -> list[str]:
        return [m.record.id for m in self.records]

    @property
    def days(self) -> list[str]:
        return sorted({m.record.created_at.date().isoformat() for m in self.records})

    @property
    def messages(self) -> int:
        """Conversation messages: user and assistant text, tool calls and tool results."""
        return sum(1 for m in self.records if not m.record.is_control)

    @property
    def memories(self) -> int:
        return sum(1 for m in self.records if m.record.type is MessageType.MEMORY_SAVED)

    @property
    def exchanges(self) -> int:
        return sum(1 for m in self.records if m.record.type is MessageType.EXCHANGE_OPEN)

    @property
    def scheduled_tasks(self) -> list[str]:
        """The tasks this plan's `schedule_add` calls created (those whose result was no error), in
        order. Forgetting leaves them scheduled, message and all (decision 280): the answer names the
        ones still there (`tasks_left_sentence`)."""
        return self._called(ADD_TOOL, "name")

    @property
    def spawned_runs(self) -> list[str]:
        """The task names of the runs this plan's `subagent_spawn` calls started. A run keeps the
        message it was given and its answer in its own log, and its answer came into the chat after
        the exchange: forgetting the exchange does not reach them, so the answer names them
        (`runs_left_sentence`)."""
        return self._called(SPAWN_TOOL, "task_name")

    def _called(self, tool: str, argument: str) -> list[str]:
        """`argument` of each call of `tool` in the plan whose result was no error, in order, once each."""
        failed = {
            (m.record.metadata or {}).get("tool_call_id")
            for m in self.records
            if m.record.type is MessageType.TOOL_RESULT and (m.record.metadata or {}).get("is_error")
        }
        names: list[str] = []
        for message in self.records:
            if message.record.type is not MessageType.TOOL_CALL:
                continue
            for call in (message.record.metadata or {}).get("tool_calls", []):
                if isinstance(call, dict) and call.get("name") == tool and call.get("id") not in failed:
                    name = _argument(call, argument)
                    if name is not None and name not in names:
                        names.append(name)
        return names

    def describe(self) -> str:
        parts = [f"{self.messages} message(s)"]
        if self.kind is ForgetKind.MEMORY:
            parts[0] += " (the memory_save call and its result)"
        if self.kind is not ForgetKind.EXCHANGE and self.exchanges:
            parts.append(f"{self.exchanges} exchange(s)")
        if self.memories:
            parts.append(f"{self.memories} saved memor{'y' if self.memories == 1 else 'ies'}")
        if self.asked_in is not None:
            parts.append(
                f"but not the message that asked for it, which stays in exchange {self.asked_in}, in search and the log"
                f" (klaw memory forget exchange {self.asked_in}, or /forget exchange {self.asked_in} in the chat,"
                " erases that whole turn)"
            )
        if self.answered_by is not None:
            parts.append(
                f"not the message(s) it answered: klaw stopped before this turn ended and exchange"
                f" {self.answered_by} answered them again, so they stay with that exchange"
                f" (forget exchange {self.answered_by} to erase them)"
            )
        if self.cut_off:
            listed = ", ".join(str(e) for e in self.cut_off)
            one = len(self.cut_off) == 1
            parts.append(
                f"with {'exchange' if one else 'exchanges'} {listed}, the turn{'' if one else 's'} klaw stopping"
                f" cut off before {'it' if one else 'they'} answered the same message(s)"
            )
        return ", ".join(parts)


@dataclass(frozen=True)
class ForgetOutcome:
    plan: ForgetPlan | None  # None: the command was replayed and had already been carried out
    files_rewritten: int
    copy: str = ""  # what the SQLite copy a migrate left held and what was done with it (decision 539)


class Forgetting:
    def __init__(self, ingestion: Ingestion, clock: Callable[[], datetime], copy: MigratedCopy | None = None) -> None:
        self._ingestion = ingestion
        self._copy = copy  # a PostgreSQL home's SQLite copy, erased with the database (decision 539)
        self._store = ingestion.store
        self._log = ingestion.log
        self._clock = clock
        self.notes = ForgetNotes(self._store, self._log, copy)

    async def plan(self, kind: ForgetKind, target_id: int | str, chat: ChatRef | None) -> ForgetPlan:
        """What forgetting the target removes (`target_id` as typed: checked by `typed_target`). `chat` (None:
        any chat) must own the target; a target of another chat is reported exactly like an unknown
        one, so nothing about it leaks (a memory's id is looked up in `chat` alone)."""
        target = typed_target(kind, str(target_id))
        owner, shown, records = await self._resolve(kind, target, chat)
        if owner is None or (chat is not None and owner != chat):
            where = "" if chat is None else " in this chat"
            listing = f"klaw memory list --chat {chat or 'CHANNEL:CHAT_ID'}"
            hint = f" ({WHERE_SHOWN})" if kind is ForgetKind.MEMORY else f" (`{listing}` shows its ids)"
            raise ForgetError(f"there is no {kind.value} {target}{where}{hint}")
        named = (
            segment_words(await number_of(self._store, int(target)), int(target)) if kind is ForgetKind.SEGMENT else ""
        )
        if not records:
            raise ForgetError(f"{named or f'{kind.value} {shown}'} holds nothing left to forget")
        if kind is ForgetKind.EXCHANGE:
            return await self._exchange_plan(ForgetPlan(owner, kind, shown, tuple(records)))
        if kind is ForgetKind.MEMORY:
            return ForgetPlan(owner, kind, shown, tuple(records), asked_in=await self._asked_in(records))
        return ForgetPlan(owner, kind, shown, tuple(records), named=named)

    async def _asked_in(self, records: Sequence[StoredMessage]) -> int | None:
        """The exchange whose person's message a memory's memory_save call answered: the last one of its
        segment opened at or before the call. None when it has no such message (a scheduled task's turn)."""
        call = min(records, key=lambda m: m.rowid)
        opened = [
            e
            for e in await self._store.exchanges.for_segment(call.segment_id)
            if e.user_message_rowid is not None and e.user_message_rowid <= call.rowid
        ]
        return max(opened, key=lambda e: e.user_message_rowid or 0).id if opened else None

    async def _exchange_plan(self, plan: ForgetPlan) -> ForgetPlan:
        """An exchange's plan when a crash cut a turn off and the restart answered its messages again in a
        later exchange (decision 306). Those messages are the later exchange's: forgetting the cut-off one
        erases its own records (its opening, its tool calls and results, its close) and leaves them;
        forgetting the later one erases the cut-off ones with them (else a round about messages gone)."""
        exchange = await self._store.exchanges.get(int(plan.target_id))
        if exchange is None or exchange.user_message_rowid is None:
            return plan
        exchanges = sorted(await self._store.exchanges.for_segment(exchange.segment_id), key=lambda e: e.id)
        alone = {
            e.id for e in exchanges if e.status is ExchangeStatus.INTERRUPTED and await self._not_answered_again(e.id)
        }
        cut = [e.id not in alone and _cut_off(e, exchanges[i + 1 :]) for i, e in enumerate(exchanges)]
        at = next(i for i, e in enumerate(exchanges) if e.id == exchange.id)
        if cut[at]:
            later = next((e for i, e in enumerate(exchanges[at + 1 :], at + 1) if not cut[i]), None)
            if later is None or (later.user_message_rowid or 0) < exchange.user_message_rowid:
                return plan  # never answered again (too old to resume, say): its messages are its own
            own = tuple(m for m in plan.records if m.record.role is not Role.USER)
            if not own:
                raise ForgetError(f"exchange {plan.target_id} holds nothing but messages exchange {later.id} answers")
            return dataclasses.replace(plan, records=own, answered_by=later.id)
        earlier: list[int] = []
        while at > 0 and cut[at - 1]:
            at -= 1
            earlier.insert(0, exchanges[at].id)
        if not earlier:
            return plan
        records = {m.rowid: m for m in plan.records}
        for cut_off in earlier:
            records.update((m.rowid, m) for m in await self._store.history.exchange_messages(cut_off) or [])
        kept = tuple(sorted(records.values(), key=lambda m: m.rowid))
        return dataclasses.replace(plan, records=kept, cut_off=tuple(earlier))

    async def _not_answered_again(self, exchange_id: int) -> bool:
        """An interrupted exchange whose message was too old to answer again (decision 325): its message is
        its own, as an exchange's, and forgetting the next exchange does not take it."""
        records = await self._store.history.exchange_messages(exchange_id) or []
        return any(
            m.record.type is MessageType.EXCHANGE_CLOSE and (m.record.metadata or {}).get(NOT_ANSWERED_AGAIN)
            for m in records
        )

    async def latest_exchange(self, chat: ChatRef) -> int:
        exchange_id = await self._store.history.latest_exchange_id(chat)
        if exchange_id is None:
            raise ForgetError("this chat has no exchange to forget yet")
        return exchange_id

    async def segment_of_number(self, chat: ChatRef, number: int) -> int:
        """The id of `chat`'s segment `number` (the page's), or ForgetError naming the numbers it has."""
        return await id_of_number(self._store, chat, number)

    async def already_done(self, record_id: str | None) -> bool:
        """A command replayed with the id it was first carried out under changes nothing twice."""
        return await self._ingestion.stored(record_id) is not None

    async def forget(self, plan: ForgetPlan, *, record_id: str | None = None) -> ForgetOutcome:
        """Carry out `plan`; `record_id` (a command's id) becomes the tombstone's id."""
        async with self._ingestion.exclusive:  # no summary of these records is logged meanwhile
            if await self.already_done(record_id):
                return ForgetOutcome(None, 0)
            # The summary records retelling them go too (every version): out of the log files, and
            # named by the tombstone so that a reindex never folds them again.
            summaries = await self._store.history.summary_records(plan.chat, plan.ids)
            ids = [*plan.ids, *(m.record.id for m in summaries)]
            days = sorted({*plan.days, *(m.record.created_at.date().isoformat() for m in summaries)})
            high = await self._store.exchanges.high_water()
            tombstone = forget_record(plan.chat, ids, plan.label, days, self._clock(), record_id, high)
            await self._note_pending(tombstone.id, add=True)
            await self._ingestion.accept(tombstone)
            await self._end_if_open(plan)
            rewritten, copy = await _carried_through(self._rewrite(plan.chat, ids, days, tombstone.id))
        log.info(
            "forgot %s of chat %s: %d record(s), %d log file(s) rewritten",
            plan.label,
            plan.chat,
            len(plan.records),
            len(rewritten),
        )
        return ForgetOutcome(plan, len(rewritten), copy)

    async def _end_if_open(self, plan: ForgetPlan) -> None:
        """A forgotten open segment is ended (a `session_break` logged, as `/new`'s): the next message starts
        a segment of a new id, never the forgotten one's, which a stored id still names (decision 539)."""
        if plan.kind is ForgetKind.SEGMENT and await self._store.segments.open_among([int(plan.target_id)]):
            brk = MessageRecord(plan.chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=self._clock())
            await self._ingestion.accept(brk)

    async def _rewrite(
        self, chat: ChatRef, ids: list[str], days: list[str], tombstone_id: str
    ) -> tuple[list[Path], str]:
        rewritten = await self._log.remove_records(chat, ids, days)
        await self._store.history.checkpoint()
        copy = "" if self._copy is None else await asyncio.to_thread(self._copy.erase, chat, ids)
        await self._note_pending(tombstone_id, add=False)
        return rewritten, copy

    async def pending_targets(self) -> list[tuple[ChatRef, str]]:
        """What the forgets `finish_pending` would rewrite the log for erased (chat, `exchange 7`): named by
        `klaw log check` and `klaw memory forget` while the log files still hold the text (decisions 454, 468)."""
        return [(n.chat, n.target) for n in await self.notes.read() if n.left is Left.LOG]

    async def finish_pending(self) -> int:
        """Rewrite the log files a forget interrupted by a crash left holding forgotten records, and drop
        the notes of forgets done (run at start-up, after crash recovery); returns how many files were
        rewritten."""
        return await self.notes.finish()

    async def _resolve(
        self, kind: ForgetKind, target_id: int | str, chat: ChatRef | None
    ) -> tuple[ChatRef | None, int | str, list[StoredMessage]]:
        """The target's chat, its id as shown, and its records."""
        if kind is ForgetKind.EXCHANGE:
            exchange = await self._store.exchanges.get(int(target_id))
            if exchange is None:
                return None, target_id, []
            return exchange.chat, target_id, await self._store.history.exchange_messages(int(target_id)) or []
        if kind is ForgetKind.SEGMENT:
            segment = await self._store.segments.get(int(target_id))
            if segment is None:
                return None, target_id, []
            # tombstones are kept; only a forget's tombstone and break left: nothing to forget (decision 539)
            records = [
                m for m in await self._store.history.segment_messages(int(target_id)) if m.record.type not in _KEPT
            ]
            if all(m.record.type in _STATE for m in records):
                records = []
            return segment.chat, target_id, records
        chunk = await resolve_memory(self._store.memory_chunks, str(target_id), chat)
        if chunk is None:
            return None, target_id, []
        saved = await self._store.messages.get(chunk.record_id)
        records = [saved] if saved is not None else []
        from klaw.memory.archival_memory import SAVE_TOOL  # numpy and the search: only when forgetting

        # The memory_save call that wrote it holds the text in its arguments: that round goes too.
        for tool_round in await self._store.history.tool_rounds(chunk.chat, SAVE_TOOL):
            if chunk.content in _saved_texts(tool_round[0]):
                records.extend(tool_round)
        shown = max(chunk.memory_id, str(target_id), key=len)  # what was typed, when longer (it was ambiguous)
        return chunk.chat, shown, sorted({m.rowid: m for m in records}.values(), key=lambda m: m.rowid)

    async def _note_pending(self, tombstone_id: str, *, add: bool) -> None:
        await self.notes.note(tombstone_id, add=add)


_KEPT, _STATE = frozenset({MessageType.FORGET}), frozenset({MessageType.SESSION_BREAK, MessageType.MODEL_SWITCH})


async def _carried_through(work: Coroutine[object, object, T]) -> T:
    """`work` carried to its end though the caller is cancelled once (Ctrl-C, an engine stopping), which is
    then raised: after the tombstone the rewrite is a few files, and a stop there would leave the forgotten
    text in them until the next start (decision 454). A second cancellation stops it; `finish_pending` redoes it."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


def _cut_off(exchange: Exchange, later: Sequence[Exchange]) -> bool:
    """A turn klaw stopping cut off: closed as such, or left open beside a later exchange of the same
    message (a crash before decision 306; a turn under way is the last of its message's)."""
    if exchange.status is ExchangeStatus.INTERRUPTED:
        return True
    rowid = exchange.user_message_rowid
    return exchange.status is ExchangeStatus.OPEN and any(e.user_message_rowid == rowid for e in later)


def _argument(call: dict[str, object], key: str) -> str | None:
    """A string argument of a logged tool call, None when its JSON or the value is not usable."""
    try:
        arguments = json.loads(str(call.get("arguments") or "{}"))
    except ValueError:
        return None
    value = arguments.get(key) if isinstance(arguments, dict) else None
    return value if isinstance(value, str) else None


def _saved_texts(call_record: StoredMessage) -> set[str]:
    """The texts a tool-call record asked memory_save to keep (as `ArchivalMemory.save` stores them)."""
    from klaw.memory.archival_memory import SAVE_TOOL

    calls = (call_record.record.metadata or {}).get("tool_calls", [])
    return {
        text.strip()
        for call in calls
        if isinstance(call, dict) and call.get("name") == SAVE_TOOL and (text := _argument(call, "text")) is not None
    }
