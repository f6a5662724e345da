"""Archival memory and forgetting in the conversation log: the `memory_saved` and `forget` records.

Both go through the log like every other record, so `klaw reindex` rebuilds what they did and crash
recovery finishes what they started; the store folds them as they are appended
(`store/sqlite/archival_fold.py`), exactly as `exchange_open`/`exchange_close` are folded.

- `memory_saved` (`system`): `content` is the memory's text, the only copy the log has. The store
  keeps that text in `memory_chunks` (searchable, embedded) and an empty `messages` row for the id.
- `forget` (`system`, empty): a tombstone. `metadata = {"ids": [record ids], "target": "segment 3",
  "days": ["2026-01-01", …]}`: which records are forgotten (ids only, never their text), what a person
  asked to forget (for reading the log; ids of another database), and the UTC days whose log files
  held them, so an interrupted rewrite of those files can be finished at the next start; and
  `"exchange_high": n`, the highest exchange id given out when it was written, so a database rebuilt
  from the log (where the forgotten exchanges left no record) never numbers a new exchange with a
  forgotten one's id (docs/decisions/100-stable-exchange-ids.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from klaw.store.records import ChatRef, MessageRecord, MessageType, Role, new_message_id

# A saved memory's id as a person reads it: the first characters of its `memory_saved` record's id
# (32 hex digits), as git shortens a commit's. Longer input is accepted while it stays a prefix
# (docs/decisions/245-stable-memory-ids.md).
MEMORY_ID_CHARS = 8


def shown_memory_id(record_id: str) -> str:
    """The id `/memory`, `klaw memory list` and the memory tools show for the memory of `record_id`."""
    return record_id[:MEMORY_ID_CHARS].lower()


@dataclass(frozen=True, slots=True)
class MemoryChunk:
    """One saved memory. Its `rowid` (= the rowid of its `memory_saved` record) is the store's own key,
    renumbered by every rebuild; a person and the model see `memory_id`, taken from the record's id in
    the log, which a reindex, a migration and either backend keep."""

    rowid: int
    record_id: str  # the memory_saved record's id in the log
    chat: ChatRef
    segment_id: int
    content: str
    created_at: datetime

    @property
    def memory_id(self) -> str:
        return shown_memory_id(self.record_id)


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A memory found by a search, with the backend's own score (bm25 rank or cosine distance)."""

    chunk: MemoryChunk
    score: float


def memory_saved_record(chat: ChatRef, text: str, at: datetime) -> MessageRecord:
    return MessageRecord(chat, Role.SYSTEM, text, type=MessageType.MEMORY_SAVED, created_at=at)


def forget_record(
    chat: ChatRef,
    ids: Iterable[str],
    target: str,
    days: Iterable[str],
    at: datetime,
    record_id: str | None = None,
    exchange_high: int | None = None,
) -> MessageRecord:
    """A tombstone for `ids` (records of `chat`). `record_id` makes a replayed command idempotent."""
    metadata: dict[str, object] = {"ids": sorted(set(ids)), "target": target, "days": sorted(set(days))}
    if exchange_high is not None:
        metadata["exchange_high"] = exchange_high
    return MessageRecord(
        chat,
        Role.SYSTEM,
        "",
        type=MessageType.FORGET,
        id=record_id or new_message_id(),
        created_at=at,
        metadata=metadata,
    )


def forgotten_ids(record: MessageRecord) -> frozenset[str]:
    """The ids a `forget` record names (empty for any other record), read tolerantly: a hand-edited
    log must not crash a fold or a rebuild."""
    if record.type is not MessageType.FORGET:
        return frozenset()
    ids = (record.metadata or {}).get("ids")
    if not isinstance(ids, list):
        return frozenset()
    return frozenset(value for value in ids if isinstance(value, str))


def remembered_exchange_high(record: MessageRecord) -> int | None:
    """The exchange high-water mark a `forget` record remembers (None: an older tombstone, or not one)."""
    value = (record.metadata or {}).get("exchange_high") if record.type is MessageType.FORGET else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        return None
    return value


def forgotten_days(record: MessageRecord) -> frozenset[str]:
    days = (record.metadata or {}).get("days")
    if not isinstance(days, list):
        return frozenset()
    return frozenset(value for value in days if isinstance(value, str))


def tombstoned(records: Iterable[MessageRecord]) -> frozenset[str]:
    """Every id forgotten by the `forget` records among `records`."""
    found: set[str] = set()
    for record in records:
        found |= forgotten_ids(record)
    return frozenset(found)
