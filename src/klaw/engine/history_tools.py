"""Which tool calls the chat's history lists with which message (the `history` query: the web page's
chat after a reload), as the live reply listed them.

A reply lists the calls made since the reply before it. A person's message stored in between (sent
while an approval waited, or while the model wrote) does not end the turn's calls: before, that reply
listed none (decision 360). A turn that ended without a reply (it failed, or a crash cut it off) is no
part of the next turn: its calls are listed with the person's message it was answering, never under the
next turn's reply (fh9: they were, as if the next turn had made them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from klaw.engine.tools_used import tool_runs
from klaw.store.protocol import Storage
from klaw.store.records import Exchange, ExchangeStatus, MessageRecord, MessageType, RecordKind, StoredMessage

ENDED_WITHOUT_A_REPLY = frozenset({ExchangeStatus.FAILED, ExchangeStatus.INTERRUPTED})
NOT_ANSWERED = frozenset({ExchangeStatus.OPEN, ExchangeStatus.INTERRUPTED})  # as answered_elsewhere's


@dataclass
class _Calls:
    """One turn's calls in order, and why a call was not run, by its place among them (the `not_run` of
    its result)."""

    names: list[str] = field(default_factory=list)
    places: dict[str, int] = field(default_factory=dict)
    not_run: dict[int, str] = field(default_factory=dict)

    def take(self, message: StoredMessage) -> None:
        self.take_record(message.record)

    def take_record(self, record: MessageRecord) -> None:
        metadata = record.metadata or {}
        if record.type is MessageType.TOOL_CALL:
            calls = [call for call in metadata.get("tool_calls", []) if isinstance(call, dict)]
            self.places.update((str(call.get("id")), len(self.names) + n) for n, call in enumerate(calls))
            self.names += [str(call.get("name")) for call in calls]
        elif record.type is MessageType.TOOL_RESULT and isinstance(why := metadata.get("not_run"), str):
            place = self.places.get(str(metadata.get("tool_call_id")))
            if place is not None:
                self.not_run[place] = why

    def runs(self) -> tuple[str, ...]:
        return tool_runs(self.names, self.not_run)


def record_runs(records: Iterable[MessageRecord]) -> tuple[str, ...]:
    """The calls of `records` (a scheduled task's run, as its log holds it) as a reply lists them, a call
    refused for lack of approval marked "(denied)" as in a chat (`klaw schedule runs`: newcomer15)."""
    calls = _Calls()
    for record in records:
        calls.take_record(record)
    return calls.runs()


@dataclass(frozen=True)
class HistoryTools:
    """`replies`: by the index of a reply in the window, its turn's calls; `unanswered`: by the rowid of
    the person's message a turn ended without answering, that turn's calls. Runs as `tool_runs` bounds them."""

    replies: Mapping[int, tuple[str, ...]]
    unanswered: Mapping[int, tuple[str, ...]]


async def unanswered_turns(store: Storage, exchanges: Iterable[Exchange]) -> dict[int, int]:
    """The rowid of each record of a turn of the segment (its `exchanges`) that ended without a reply (it
    failed, or a crash cut it off; not one under way), mapped to the rowid of the person's message that turn
    answered. A failed turn is rare: one read per such turn."""
    owners: dict[int, int] = {}
    for exchange in exchanges:
        if exchange.status not in ENDED_WITHOUT_A_REPLY or exchange.user_message_rowid is None:
            continue  # answered, or still under way (its calls are listed with its reply once it comes)
        for message in await store.history.exchange_messages(exchange.id) or []:
            owners[message.rowid] = exchange.user_message_rowid
    return owners


def answered_up_to(exchanges: Iterable[Exchange]) -> int:
    """The rowid of the last of the segment's messages a turn answered (0: none yet): a turn answers every
    message of its chat up to its own (several sent in a burst are one turn: decision 505), so each person's
    message at or before it was answered, by that turn or an earlier one; the ones after still wait. The
    engine's rule for what it answers next (answered_elsewhere.unanswered), read for the page's history."""
    closed = [e.user_message_rowid or 0 for e in exchanges if e.status not in NOT_ANSWERED]
    return max(closed, default=0)


def history_tools(window: Sequence[StoredMessage], unanswered: Mapping[int, int]) -> HistoryTools:
    """Each reply's calls and each unanswered turn's, from the segment's `window` (oldest first) and
    `unanswered_turns`."""
    replies: dict[int, tuple[str, ...]] = {}
    ended: dict[int, _Calls] = {}
    calls = _Calls()
    for index, message in enumerate(window):
        owner = unanswered.get(message.rowid)
        if owner is not None and message.record.kind is RecordKind.TOOL_STEP:
            ended.setdefault(owner, _Calls()).take(message)
        elif message.record.kind is RecordKind.REPLY:
            if calls.names:
                replies[index] = calls.runs()
            calls = _Calls()
        else:
            calls.take(message)
    return HistoryTools(replies, {rowid: found.runs() for rowid, found in ended.items() if found.names})
