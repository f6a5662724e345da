"""Reads every turn repeats (a chat's session and segment, a segment's summary), answered from memory
until a table they come from changes.

Each turn read its chat's session, its current segment, the segment's rolling summary and whether
the chat has past segments: four round trips to the database thread that almost always return
what they returned the turn before, and that wait behind any background query in the queue
(docs/decisions/197-turn-read-cache.md).

A read is kept with the generations of the tables it read, and served while they are unchanged. A
generation is a counter raised by TEMP triggers of the engine's connection, after every insert,
update and delete of its table, through a Python function the connection calls: every writer is
covered (`/new`, `/model`, the summarizers, `/forget`, a fold at start-up), whatever code path it
takes, and nothing in the schema changes. A write that rolls back has raised the counter anyway,
which only costs a read. The counters are read on the event loop thread without a round trip (a
Python int; the database thread is the only one raising them). Only the engine's connection
writes klaw.db while it runs (decision 002); `klaw memory forget` and `klaw reindex` run with the
engine stopped.

A value is stamped before its read is sent: a write that lands between the stamp and the read makes
the value newer than its stamp, so it is read again next time (never older than its stamp).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

import apsw

from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.summaries.records import SummaryKind

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_ANY = ("INSERT", "UPDATE", "DELETE")
_SEGMENT = f"'{SummaryKind.SEGMENT.value}'"
# (generation, table, operation, condition). A turn reads segment summaries only, and the exchange
# summarizer writes an exchange summary after almost every turn: those writes leave the kept reads
# alone. A message insert changes none of them (a summary only names its record, which a delete
# can take away), so messages count their deletes alone.
_TRIGGERS = (
    ("segments", "segments", "INSERT", "1"),
    # Not `conversation_messages`, which the triggers of migration 0006 update with every message.
    ("segments", "segments", "UPDATE OF id, chat, started_at, ended_at", "1"),
    ("segments", "segments", "DELETE", "1"),
    *(("sessions", "sessions", operation, "1") for operation in _ANY),
    ("segment_summaries", "summaries", "INSERT", f"NEW.kind = {_SEGMENT}"),
    ("segment_summaries", "summaries", "UPDATE", f"{_SEGMENT} IN (NEW.kind, OLD.kind)"),
    ("segment_summaries", "summaries", "DELETE", f"OLD.kind = {_SEGMENT}"),
    ("messages_deleted", "messages", "DELETE", "1"),
    # When the next embedding job is due (job_ledger.py, decision 229): a job queued or rescheduled.
    # A delete only makes it later, which the ledger's answer tolerates (not one call per job paid).
    ("embedding_jobs", "embedding_jobs", "INSERT", "1"),
    ("embedding_jobs", "embedding_jobs", "UPDATE", "1"),
)
_FUNCTION = "klaw_table_written"


class TableGenerations:
    """Counters of one connection's writes (a table's, or some of its rows'), raised by TEMP triggers."""

    def __init__(self) -> None:
        self._counts = {generation: 0 for generation, _, _, _ in _TRIGGERS}
        self._installed = False

    def install(self, connection: apsw.Connection) -> None:
        """Create the function and the triggers (once; on the database thread)."""
        if self._installed:
            return
        connection.create_scalar_function(_FUNCTION, self._written, 1, deterministic=False)
        for number, (generation, table, operation, condition) in enumerate(_TRIGGERS):
            connection.execute(
                f"CREATE TEMP TRIGGER IF NOT EXISTS klaw_written_{number}"
                f" AFTER {operation} ON main.{table} WHEN {condition}"
                f" BEGIN SELECT {_FUNCTION}('{generation}'); END"
            )
        self._installed = True

    def stamp(self, generations: Sequence[str]) -> tuple[int, ...] | None:
        """The generations now; None before the triggers are installed (nothing is valid)."""
        return tuple(self._counts[name] for name in generations) if self._installed else None

    def _written(self, *args: apsw.SQLiteValue) -> None:
        self._counts[str(args[0])] += 1


class ReadCache(Generic[K, V]):
    """Values by key, each valid while the `tables` generations are those it was read with."""

    def __init__(
        self, db: SqliteDatabase, generations: TableGenerations, tables: Sequence[str], size: int = 1024
    ) -> None:
        self._db = db
        self._generations = generations
        self._tables = tuple(tables)
        self._size = size
        self._kept: OrderedDict[K, tuple[V, tuple[int, ...]]] = OrderedDict()

    async def get(self, key: K, read: Callable[[], Awaitable[V]]) -> V:
        """The kept value of `key`, or `read()` awaited (and kept)."""
        kept = self._kept.get(key)
        if kept is not None and kept[1] == self._generations.stamp(self._tables):
            self._kept.move_to_end(key)
            return kept[0]
        if self._generations.stamp(self._tables) is None:
            await self._db.run(self._generations.install)
        stamp = self._generations.stamp(self._tables)
        value = await read()
        if stamp is not None:
            self._kept[key] = (value, stamp)
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return value
