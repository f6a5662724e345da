"""Records a hand-edited log can hold that klaw never writes: a person's message longer than any channel takes,
a date in the future, one id on two lines (adversary28, decision 488).

Each parses, so the readers took them: start-up recovery stored a 10 MB message and a turn built 2.5 million
tokens for a 7,372-token model. `klaw log check` names them (ids, sizes and dates, never text); recovery leaves
an over-long person's message out, as a channel would have refused it (`message_text.MAX_MESSAGE_CHARS`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from klaw.message_text import MAX_MESSAGE_CHARS
from klaw.store.records import MessageRecord, MessageType, Role

# A record dated further ahead than this was not written by a klaw whose clock is right (nor a step of one).
FUTURE_SLACK = timedelta(days=1)


def over_cap(record: MessageRecord) -> bool:
    """A person's message longer than a channel takes: no klaw wrote it, it was typed into the log."""
    return record.role is Role.USER and record.type is MessageType.TEXT and len(record.content) > MAX_MESSAGE_CHARS


def over_cap_words(record: MessageRecord) -> str:
    return (
        f"record {record.id}: a person's message of {len(record.content):,} characters, more than the"
        f" {MAX_MESSAGE_CHARS:,} a message may hold (no channel takes it); recovery leaves it out"
    )


def oddities(records: Sequence[MessageRecord], now: datetime) -> list[str]:
    """One sentence per odd record of one chat's log, in the log's order."""
    said: list[str] = []
    lines = Counter(record.id for record in records)
    named: set[str | None] = set()
    for record in records:
        if over_cap(record):
            said.append(over_cap_words(record))
        if record.created_at > now + FUTURE_SLACK:
            said.append(f"record {record.id}: dated {record.created_at:%Y-%m-%d}, in the future")
        if lines[record.id] > 1 and record.id not in named:
            named.add(record.id)
            said.append(f"record {record.id}: its id is on {lines[record.id]} lines (readers keep the first)")
    return said
