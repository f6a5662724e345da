"""Summaries in the conversation log: the `exchange_summary` and `segment_summary` records.

A summary costs a model call (on a small machine with a local model, seconds each; a year of chat,
hours), and a second call would not write the same text. So a summary goes through the log like
every other record, and the store folds it into `summaries` as it is appended
(`store/summaries/sqlite/fold.py`): live ingestion, crash recovery and `klaw reindex` do the same
thing, and a rebuilt database has the same summaries without a single model call.

Both records are `system` control records (never shown to a model, searched or embedded as
messages); `content` is the summary's text, the only copy the log has (the `messages` row keeps
none, like `memory_saved`). Every reference is a record id of the log, the same in any database
built from it (row ids are not):

- `exchange_summary`: `{"exchange": id of the exchange's exchange_open record, "sources": [ids of the
  records it was written from], "model": model id}`.
- `segment_summary`: `{"covers": id of the exchange_open record of the newest exchange folded in (it
  names the segment too), "final": bool, "exchanges_covered": n, "sources": [ids of the summary
  records folded in, the previous segment summary's included], "model": model id}`. A later one
  replaces the earlier (rolling), `final` once the segment is closed and folded to its end.

The fold stores a summary only if what it names still exists: a summary written while its exchange
was being forgotten is never stored. `/forget` names the summary records it makes obsolete in its
tombstone, so their lines leave the log and a reindex skips them (`memory/forgetting.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from klaw.store.summaries.records import SummaryKind

SUMMARY_RECORD_TYPES = (MessageType.EXCHANGE_SUMMARY, MessageType.SEGMENT_SUMMARY)

log = logging.getLogger(__name__)


def exchange_summary_record(
    chat: ChatRef, text: str, *, exchange: str, sources: Sequence[str], model: str, at: datetime
) -> MessageRecord:
    """`exchange` is the id of the exchange's `exchange_open` record."""
    metadata = {"exchange": exchange, "sources": list(dict.fromkeys(sources)), "model": model}
    return MessageRecord(chat, Role.SYSTEM, text, type=MessageType.EXCHANGE_SUMMARY, created_at=at, metadata=metadata)


def segment_summary_record(
    chat: ChatRef,
    text: str,
    *,
    covers: str,
    final: bool,
    exchanges_covered: int,
    sources: Sequence[str],
    model: str,
    at: datetime,
) -> MessageRecord:
    """`covers` is the id of the `exchange_open` record of the newest exchange the summary folds in."""
    metadata = {
        "covers": covers,
        "final": final,
        "exchanges_covered": exchanges_covered,
        "sources": list(dict.fromkeys(sources)),
        "model": model,
    }
    return MessageRecord(chat, Role.SYSTEM, text, type=MessageType.SEGMENT_SUMMARY, created_at=at, metadata=metadata)


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """What a summary record says, read tolerantly: a hand-edited log must not crash a fold."""

    kind: SummaryKind
    text: str
    exchange_open_id: str  # the exchange (exchange summary) or the newest exchange covered (segment)
    sources: tuple[str, ...]
    model: str
    final: bool
    exchanges_covered: int

    @classmethod
    def from_record(cls, record: MessageRecord) -> SummaryRecord | None:
        if record.type not in SUMMARY_RECORD_TYPES:
            return None
        metadata = record.metadata or {}
        segment = record.type is MessageType.SEGMENT_SUMMARY
        target = metadata.get("covers" if segment else "exchange")
        sources = metadata.get("sources", [])
        model = metadata.get("model")
        covered = metadata.get("exchanges_covered", 1)
        if not isinstance(target, str) or not isinstance(sources, list) or not record.content.strip():
            return None
        return cls(
            kind=SummaryKind.SEGMENT if segment else SummaryKind.EXCHANGE,
            text=record.content,
            exchange_open_id=target,
            sources=tuple(s for s in sources if isinstance(s, str)),
            model=model if isinstance(model, str) else "",
            final=bool(metadata.get("final")) if segment else True,
            exchanges_covered=covered if isinstance(covered, int) and not isinstance(covered, bool) else 1,
        )


def summary_to_fold(record: MessageRecord) -> SummaryRecord | None:
    """What a fold stores from `record`: None for a record of another type, and for a summary record
    without usable text or exchange (logged by type and id, never content, and ignored)."""
    if record.type not in SUMMARY_RECORD_TYPES:
        return None
    parsed = SummaryRecord.from_record(record)
    if parsed is None:
        log.warning("%s record %s has no usable text or exchange; ignored", record.type.value, record.id)
    return parsed
