"""Exchanges in the conversation log: the `exchange_open` and `exchange_close` control records.

An exchange (one turn: the pending user messages up to the agent's final reply) used to live only
in `exchanges`, written by the processor; a rebuilt database could not have it. It now goes
through the log like `/new` and `/model` do, and the store folds these records into `exchanges`
when they are appended (`store/sqlite/exchange_fold.py`). Live ingestion and `klaw reindex` run the
same fold over the same records, so they cannot disagree, and a turn the engine never finished
(crash, cancelled drain) stays `open` in both.

Why records rather than deriving turns from the message sequence: a turn's start time (after the
debounce), a failed turn (its error reply is delivered but not logged) and the exact user message
that opened it are not recoverable from the messages alone.

Both records are `system`, empty and never shown to a model, searched or embedded.
- `exchange_open`: `{"user_message_id": id, "exchange": n}`: the last pending user message and the
  exchange's id, reserved from the store's high-water mark before the record is logged, so the id a
  person sees survives `/forget` + `klaw reindex` (docs/decisions/100-stable-exchange-ids.md); a
  record of an older log has no `exchange` and is numbered by the fold as it always was;
  `created_at` = the start.
- `exchange_close`: `{"opened": id of the exchange_open record, "status": completed|failed|tool_limit,
  "final_message_id": id}` (no final id when the turn failed); `created_at` = the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role


def exchange_open_record(
    chat: ChatRef, user_message_id: str | None, at: datetime, exchange_id: int | None = None
) -> MessageRecord:
    metadata: dict[str, str | int] = {} if user_message_id is None else {"user_message_id": user_message_id}
    if exchange_id is not None:
        metadata["exchange"] = exchange_id
    return MessageRecord(chat, Role.SYSTEM, "", type=MessageType.EXCHANGE_OPEN, created_at=at, metadata=metadata)


UNASKED_SOURCES = frozenset({"task", "message_send"})
"""`metadata["source"]` of an assistant message the agent sends on its own, outside any turn: a
scheduled task's or a subagent's answer (`engine/subagents.py`), a message from another chat
(`engine/agent_messages.py`). Nobody waits for it on a prompt, so it is kept to deliver like a turn's
reply (`sent_unasked`)."""

NO_EXCHANGE = 0
"""`undelivered_replies.exchange_id` of a message sent unasked: no exchange has id 0 (ids start at 1)."""


def sent_unasked(record: MessageRecord) -> bool:
    """Whether `record` is a message the agent sent on its own, to be kept in `undelivered_replies`
    until a channel confirms it was shown, and sent again at start (docs/decisions/101-reply-redelivery.md).
    Before, only a turn's final reply was kept: an engine stopped between logging a task's answer and a
    gateway showing it (or before any gateway served the chat's channel) lost it from the chat's screen."""
    source = (record.metadata or {}).get("source")
    return record.role is Role.ASSISTANT and record.type is MessageType.TEXT and source in UNASKED_SOURCES


NOT_ANSWERED_AGAIN = "not_answered_again"
"""In an `interrupted` close: the turn a crash cut off whose message was too old to answer again (decision 325)."""


def exchange_close_record(
    opened: MessageRecord,
    status: ExchangeStatus,
    final_message_id: str | None,
    at: datetime,
    *,
    answered_again: bool = True,
) -> MessageRecord:
    if status is ExchangeStatus.OPEN:
        raise ValueError("an exchange is closed with a final status, not 'open'")
    metadata: dict[str, str] = {"opened": opened.id, "status": status.value}
    if final_message_id is not None:
        metadata["final_message_id"] = final_message_id
    if not answered_again:
        metadata[NOT_ANSWERED_AGAIN] = "true"
    return MessageRecord(
        opened.chat, Role.SYSTEM, "", type=MessageType.EXCHANGE_CLOSE, created_at=at, metadata=metadata
    )


@dataclass(frozen=True)
class ExchangeClose:
    """What an `exchange_close` record says, read tolerantly (a hand-edited log must not crash a fold)."""

    opened: str
    status: ExchangeStatus
    final_message_id: str | None

    @classmethod
    def from_record(cls, record: MessageRecord) -> ExchangeClose | None:
        metadata = record.metadata or {}
        opened, status, final = metadata.get("opened"), metadata.get("status"), metadata.get("final_message_id")
        if not isinstance(opened, str) or status not in _FINAL_STATUSES:
            return None
        return cls(opened, ExchangeStatus(status), final if isinstance(final, str) else None)


def opened_user_message_id(record: MessageRecord) -> str | None:
    """The user message an `exchange_open` record names, if any."""
    value = (record.metadata or {}).get("user_message_id")
    return value if isinstance(value, str) else None


def opened_exchange_id(metadata: object) -> int | None:
    """The exchange id an `exchange_open` record's metadata carries: a positive integer, else None
    (an older log, or a hand-edited value the fold numbers itself)."""
    value = metadata.get("exchange") if isinstance(metadata, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        return None
    return value


_FINAL_STATUSES = {s.value for s in ExchangeStatus if s is not ExchangeStatus.OPEN}


@dataclass(frozen=True, slots=True)
class Opening:
    """A stored `exchange_open` record as the folds need it: its time (the exchange's start), the user
    message it names and the exchange id it carries. Read from a row of `OPENING_SQL`."""

    started_at: int
    user_message_id: str | None
    exchange_id: int | None

    @classmethod
    def from_row(cls, row: tuple[object, ...]) -> Opening:
        metadata = json.loads(str(row[1])) if row[1] else {}
        user = metadata.get("user_message_id") if isinstance(metadata, dict) else None
        return cls(int(str(row[0])), user if isinstance(user, str) else None, opened_exchange_id(metadata))


# The chat's `exchange_open` record by id (parameters: record id, chat key, EXCHANGE_OPEN).
OPENING_SQL = "SELECT created_at, metadata FROM messages WHERE id = ? AND chat = ? AND type = ?"
