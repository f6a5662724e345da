"""The one-time export of summaries written before summaries were logged.

A klaw.db from an older klaw holds summaries that no log record carries: `klaw reindex` would lose
them and the summarizers would pay a model call per exchange to write them again. At engine start
(after crash recovery, before the summarizers run) each such summary is appended to its chat's log
as a summary record, dated now, exchange summaries first so a segment summary can name them as its
sources. The fold finds the summary already there with the same text, so it only notes its record:
nothing is embedded again. Idempotent: an exported summary has a record and is not exported twice;
an export cut short by a crash is folded by the next start's recovery and carried on.

A summary whose exchange has no `exchange_open` record (logged by a klaw older than exchange
records) cannot be named by one and stays unlogged; a reindex would not rebuild that exchange either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from klaw.memory.ingestion import Ingestion
from klaw.store.records import MessageRecord
from klaw.store.summaries.log_records import exchange_summary_record, segment_summary_record
from klaw.store.summaries.records import Summary, SummaryKind

log = logging.getLogger(__name__)

EXPORT_LIMIT = 10_000_000  # every unlogged summary in one list: a year of chat holds some thousands


async def export_unlogged_summaries(ingestion: Ingestion, clock: Callable[[], datetime]) -> int:
    """Append a log record for every summary that has none; returns how many were exported."""
    summaries = ingestion.store.summaries
    exported = 0
    for summary in await summaries.unlogged(EXPORT_LIMIT):
        record = await _record(ingestion, summary, clock())
        if record is not None and await summaries.foldable(record):
            await ingestion.accept(record)
            exported += 1
    if exported:
        log.info("exported %d summaries written before summaries were logged to the conversation log", exported)
    return exported


async def _record(ingestion: Ingestion, summary: Summary, at: datetime) -> MessageRecord | None:
    store = ingestion.store
    if summary.kind is SummaryKind.EXCHANGE:
        assert summary.exchange_id is not None  # an exchange summary names its exchange (schema check)
        opened = await store.summaries.exchange_record_id(summary.exchange_id)
        transcript = await store.history.exchange_messages(summary.exchange_id)
        if opened is None or transcript is None:
            return None
        return exchange_summary_record(
            summary.chat,
            summary.text,
            exchange=opened,
            sources=[m.record.id for m in transcript],
            model=summary.model,
            at=at,
        )
    covers = summary.covers_exchange_id
    opened = None if covers is None else await store.summaries.exchange_record_id(covers)
    if opened is None or covers is None:
        return None
    folded = [
        s.record_id
        for s in await store.summaries.in_segment(summary.segment_id)
        if s.kind is SummaryKind.EXCHANGE and s.exchange_id is not None and s.exchange_id <= covers and s.record_id
    ]
    return segment_summary_record(
        summary.chat,
        summary.text,
        covers=opened,
        final=summary.final,
        exchanges_covered=summary.exchanges_covered,
        sources=folded,
        model=summary.model,
        at=at,
    )
