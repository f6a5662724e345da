"""Records a hand-edited log can hold that klaw never writes: a person's message longer than any channel takes,
a date in the future, one id on two lines (adversary28, decision 488), lines out of their order: an exchange's
close before its open, its person's message after its open, its reply before it (adversary29, decision 503).

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
    watch = OddRecords(now)
    for record in records:
        watch.see(record)
    return watch.said()


class OddRecords:
    """`oddities` a record at a time, keeping ids and sentences only (never a record): a PostgreSQL home's
    `log_records`, read a day at a time, checked as the JSONL files are (decision 500)."""

    def __init__(self, now: datetime) -> None:
        self._now = now
        self._seen = 0
        self._said: list[tuple[int, int, str]] = []  # (the record's place, kind, sentence): the log's order
        self._lines: Counter[str] = Counter()
        self._first: dict[str, int] = {}
        # exchange records and the ids they name, with their places: judged once every line is seen (503)
        self._opens: list[tuple[int, str, str | None]] = []  # (place, the open's id, its person's message)
        self._closes: list[tuple[int, str, str | None, str | None]] = []  # (place, id, its open, its reply)

    def see(self, record: MessageRecord) -> None:
        place, self._seen = self._seen, self._seen + 1
        if over_cap(record):
            self._said.append((place, 0, over_cap_words(record)))
        if record.created_at > self._now + FUTURE_SLACK:
            self._said.append((place, 1, f"record {record.id}: dated {record.created_at:%Y-%m-%d}, in the future"))
        self._lines[record.id] += 1
        self._first.setdefault(record.id, place)
        named = record.metadata or {}
        if record.type is MessageType.EXCHANGE_OPEN:
            self._opens.append((place, record.id, _id(named.get("user_message_id"))))
        elif record.type is MessageType.EXCHANGE_CLOSE:
            self._closes.append((place, record.id, _id(named.get("opened")), _id(named.get("final_message_id"))))

    def said(self) -> list[str]:
        repeated = [
            (self._first[key], 2, f"record {key}: its id is on {count} lines (readers keep the first)")
            for key, count in self._lines.items()
            if count > 1
        ]
        return [
            sentence
            for _, _, sentence in sorted([*self._said, *repeated, *self._out_of_order()], key=lambda said: said[:2])
        ]

    def _out_of_order(self) -> list[tuple[int, int, str]]:
        """Exchange lines a person moved (swapped two lines, pasted a block elsewhere): the fold reads the log in
        its order, so `klaw reindex` ignored the close ("found no open exchange") or left the exchange half-built
        (decision 503). Only lines that are there and out of place; one forgotten is no oddity."""
        place = self._first.get
        found = []
        for at, open_id, asked in self._opens:
            if asked is not None and (where := place(asked)) is not None and where > at:
                found.append(
                    (at, 3, f"record {open_id}: an exchange_open before the person's message {asked} it opens on")
                )
        for at, close_id, opened, reply in self._closes:
            begun = place(opened) if opened is not None else None
            if begun is not None and begun > at:
                found.append((at, 3, f"record {close_id}: an exchange_close before its exchange_open {opened}"))
            elif begun is not None and reply is not None and (where := place(reply)) is not None and where < begun:
                found.append((where, 3, f"record {reply}: an exchange's reply before its exchange_open {opened}"))
        return found


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
