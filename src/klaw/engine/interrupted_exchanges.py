"""Closing the exchanges a crash left `open`: the first turn of their chat after the restart closes
them as `interrupted` before it opens its own (docs/decisions/306-a-crashed-turn-is-closed-as-interrupted.md).

A turn killed mid-way (kill -9, power loss) leaves its exchange open; the next start answers its
message again in a new exchange. Left open, the old one sat beside the new one for the same message,
shown `open` by `klaw memory list` for ever. The close is a log record like any (store/exchange_records.py),
so a rebuilt database has it too. It is written under the chat's turn lock (and lease, on a shared
store): no turn of the chat runs anywhere then, so an exchange still open whose message the turn
answers again is one a crash cut off.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from klaw.memory.ingestion import Ingestion
from klaw.store.exchange_records import exchange_close_record, opened_user_message_id
from klaw.store.records import ChatRef, ExchangeStatus, MessageType

log = logging.getLogger(__name__)


async def close_interrupted(ingestion: Ingestion, chat: ChatRef, answers: Collection[str], now: datetime) -> int:
    """Close as interrupted each open exchange of the chat's current session whose message is among
    `answers`, the messages the turn about to open answers again; returns how many. So an interrupted
    exchange is always followed by the one that answered its message (what forgetting relies on); one
    whose message was too old to answer again stays open."""
    store = ingestion.store
    segment = await store.segments.current(chat)
    closed = 0
    for exchange in await store.exchanges.for_segment(segment.id):
        if exchange.status is not ExchangeStatus.OPEN:
            continue
        records = await store.history.exchange_messages(exchange.id) or []
        opening = next((m.record for m in records if m.record.type is MessageType.EXCHANGE_OPEN), None)
        if opening is None or opened_user_message_id(opening) not in answers:
            continue  # not answered again now (or a hand-edited log, with nothing to name in a close record)
        await ingestion.accept(exchange_close_record(opening, ExchangeStatus.INTERRUPTED, None, now))
        closed += 1
    if closed:
        log.warning("closed %d exchange(s) of %s a crash cut off as interrupted", closed, chat)
    return closed
