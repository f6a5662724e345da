"""The replies another engine's turn gave to messages this engine accepted, on a store several share.

Engines sharing a PostgreSQL database serve a chat one turn at a time (decision 170), and a turn answers
every unanswered message of the chat, whichever engine accepted it. The engine whose messages were
answered that way finds them answered when its own turn's lease comes (`MessageProcessor._process`);
this module reads, from the exchanges closed meanwhile, which reply answered them, so a library caller
waiting in this engine for its `ask` gets that reply (docs/decisions/248-answered-on-another-engine.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from klaw.engine.delivery import Delivery, Outbound
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, Exchange, ExchangeStatus, StoredMessage

log = logging.getLogger(__name__)

# After a crash, unanswered messages younger than this get their turn; an answer hours late to
# something the person has moved on from would confuse more than it helps.
RESUME_WITHIN = timedelta(hours=1)

NOT_ANSWERED = frozenset({ExchangeStatus.OPEN, ExchangeStatus.INTERRUPTED})
"""An exchange in one of these states did not answer its messages: running, or cut off by a crash (decision 306)."""

FAILED_ELSEWHERE = (
    "The turn that answered this message failed on another engine sharing the database; "
    "that engine's log has the error."
)


async def replies_elsewhere(store: Storage, chat: ChatRef, messages: Sequence[StoredMessage]) -> list[Outbound]:
    """One `Outbound` per closed exchange that answers some of `messages`: its reply, or an error for a
    failed turn, with `answers` naming the messages it answered. A message no closed exchange covers
    (its segment ended without an answer) gets none."""
    answered: dict[int, tuple[Exchange, list[StoredMessage]]] = {}
    for segment_id in sorted({m.segment_id for m in messages}):
        closed = sorted(
            (e for e in await store.exchanges.for_segment(segment_id) if _closed_after(e)),
            key=lambda e: e.user_message_rowid or 0,
        )
        for message in sorted((m for m in messages if m.segment_id == segment_id), key=lambda m: m.rowid):
            # the first exchange closed at or after the message: its turn joined the message
            exchange = next((e for e in closed if (e.user_message_rowid or 0) >= message.rowid), None)
            if exchange is not None:
                answered.setdefault(exchange.id, (exchange, []))[1].append(message)
    rowids = [e.final_message_rowid for e, _ in answered.values() if e.final_message_rowid is not None]
    finals = {m.rowid: m for m in await store.messages.by_rowids(rowids)} if rowids else {}
    replies: list[Outbound] = []
    for exchange, group in answered.values():
        ids = tuple(m.record.id for m in group)
        final = finals.get(exchange.final_message_rowid or 0)
        if exchange.status is ExchangeStatus.FAILED or final is None:
            replies.append(Outbound(chat, FAILED_ELSEWHERE, ids[-1], "error", answers=ids))
        else:
            replies.append(Outbound(chat, final.content, ids[-1], "reply", answers=ids))
    return replies


def _closed_after(exchange: Exchange) -> bool:
    return exchange.status not in NOT_ANSWERED and exchange.user_message_rowid is not None


async def unanswered(store: Storage, chat: ChatRef) -> list[StoredMessage]:
    """The user messages of the chat's current segment newer than the one its last closed exchange
    answered, oldest first."""
    segment = await store.segments.current(chat)
    exchanges = await store.exchanges.for_segment(segment.id)
    closed = [e.user_message_rowid or 0 for e in exchanges if e.status not in NOT_ANSWERED]
    return await store.messages.user_messages_after(segment.id, max(closed, default=0))


async def still_unanswered(
    store: Storage, chat: ChatRef, pending: list[StoredMessage], cutoff: datetime
) -> list[StoredMessage]:
    """Under the lease, what the chat's turn answers, read afresh: another engine may have answered
    these messages before the lease came here, or accepted others (newer than `cutoff`) that join this turn."""
    mine = {m.rowid for m in pending}
    found = [m for m in await unanswered(store, chat) if m.rowid in mine or m.record.created_at >= cutoff]
    # None of ours left: the others' are their engine's to answer (it waits for this lease), so this
    # engine runs no turn whose reply nobody here asked for (decision 248).
    return found if any(m.rowid in mine for m in found) else []


async def pass_on_elsewhere(store: Storage, delivery: Delivery, chat: ChatRef, elsewhere: list[StoredMessage]) -> None:
    """Messages of ours another engine's turn answered: its reply to a library caller waiting here
    (that engine delivered it to gateways). Best effort: the reply is stored whatever happens here."""
    if not elsewhere or not delivery.has_in_process(chat.channel):
        return
    try:
        for outbound in await replies_elsewhere(store, chat, elsewhere):
            await delivery.deliver_in_process(outbound)
    except Exception as exc:
        log.warning("the reply another engine gave in %s was not passed on: %s", chat, type(exc).__name__)
