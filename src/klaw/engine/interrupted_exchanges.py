"""Closing the exchanges a crash left `open`: the first turn of their chat after the restart closes
them as `interrupted` before it opens its own (docs/decisions/306-a-crashed-turn-is-closed-as-interrupted.md).

A turn killed mid-way (kill -9, power loss) leaves its exchange open; the next start answers its
message again in a new exchange. Left open, the old one sat beside the new one for the same message,
shown `open` by `klaw memory list` for ever. The close is a log record like any (store/exchange_records.py),
so a rebuilt database has it too. It is written under the chat's turn lock (and lease, on a shared
store): no turn of the chat runs anywhere then, so an exchange still open whose message the turn
answers again is one a crash cut off. One whose message was too old to answer again (klaw down for more
than the hour resuming waits) is closed too, marked as not answered again (decision 325); its message is
still not answered: a message an hour old is not answered by itself (decision 101).

A held call whose approval question was open at the crash (engine/open_questions.py) never ran: before the
close, its result is written as that ("Not run: … never approved", decision 447), so the model is not told it
may have taken effect; any other call cut off without a result is still told as unknown (engine/transcript.py).
On a store several engines share, the calls a dead engine noted there are taken too (decision 466).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime

from klaw.engine.open_questions import drop_shared, take_shared
from klaw.engine.tools_used import NOT_ASKED
from klaw.log_format import LOG_FILE_ONLY
from klaw.memory.ingestion import Ingestion
from klaw.store.exchange_records import exchange_close_record, opened_user_message_id
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role

log = logging.getLogger(__name__)


NEVER_APPROVED = (
    "Not run: the engine stopped before the person answered the approval question (it was never approved)."
    " Ask again if it is still wanted."
)


async def close_interrupted(
    ingestion: Ingestion, chat: ChatRef, answers: Collection[str], now: datetime, never_approved: Collection[str] = ()
) -> int:
    """Close as interrupted each open exchange of the chat's current session; returns how many. One whose
    message is among `answers` (the messages the turn about to open answers again) is followed by the
    exchange that answered it, which forgetting relies on. One whose message is not, and that no later
    exchange of the session answered (too old to answer again: klaw was down longer than resuming waits),
    is closed as not answered again (decision 325): forgetting treats it as its message's own exchange.
    One left open beside a later exchange of its message (a crash before decision 306) stays as it is."""
    store = ingestion.store
    shared = frozenset[str]() if store.leases is None else await take_shared(store.settings, chat)
    never_approved = {*never_approved, *shared}  # another engine's, dead with their questions open (466)
    segment = await store.segments.current(chat)
    exchanges = await store.exchanges.for_segment(segment.id)
    closed = 0
    for exchange in exchanges:
        if exchange.status is not ExchangeStatus.OPEN:
            continue
        records = await store.history.exchange_messages(exchange.id) or []
        opening = next((m.record for m in records if m.record.type is MessageType.EXCHANGE_OPEN), None)
        if opening is None:
            continue  # a hand-edited log, with nothing to name in a close record
        again = opened_user_message_id(opening) in answers
        later = any(e.id > exchange.id and (e.user_message_rowid or 0) >= (exchange.user_message_rowid or 0)
                    for e in exchanges)  # fmt: skip
        if not again and later:
            continue  # answered by a later exchange already (left open by a crash before decision 306)
        for result in never_approved_results(chat, [m.record for m in records], never_approved, now):
            await ingestion.accept(result)
        status = ExchangeStatus.INTERRUPTED
        await ingestion.accept(exchange_close_record(opening, status, None, now, answered_again=again))
        closed += 1
    if shared:  # their results written: a kill before this leaves the note, and results are not written twice
        await drop_shared(store.settings, chat)
    if closed:
        log.warning(  # the log file only: no news on the chat's screen after a restart (decision 473)
            "closed %d exchange(s) of %s a crash cut off as interrupted", closed, chat, extra=LOG_FILE_ONLY
        )
    return closed


def never_approved_results(
    chat: ChatRef, records: Sequence[MessageRecord], never_approved: Collection[str], now: datetime
) -> list[MessageRecord]:
    """A result for each call of the exchange (or a cut-off run, decision 535) whose question was open at the
    crash and that has none."""
    answered = {str((m.metadata or {}).get("tool_call_id")) for m in records
                if m.type is MessageType.TOOL_RESULT}  # fmt: skip
    calls = [c for m in records if m.type is MessageType.TOOL_CALL
             for c in (m.metadata or {}).get("tool_calls", []) if isinstance(c, dict)]  # fmt: skip
    return [
        MessageRecord(
            chat,
            Role.TOOL,
            NEVER_APPROVED,
            type=MessageType.TOOL_RESULT,
            metadata={
                "tool_call_id": c["id"],
                "name": c.get("name"),
                "is_error": True,
                "not_run": NOT_ASKED,
                "approval": "unanswered",
            },
            created_at=now,
        )
        for c in calls
        if c.get("id") in never_approved and c.get("id") not in answered
    ]
