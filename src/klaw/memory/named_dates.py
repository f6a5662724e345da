"""Dates a search text names ("on 3 May, 2023", "in July 2023"), and the messages said then.

A person who puts a date in a question means what was said that day or that month: "what did
Gina find for her store on 1 February, 2023?" is about a message of 1 February 2023, however many
other messages talk about her store. Search scores words and meaning, neither of which knows when
a message was said, so a message of that day ranked anywhere among dozens about the same store.
Every message carries its time (`created_at`); this module reads the dates out of the text, and
`HybridSearch` adds `search.dateWeight` to the fused score of the candidates said within one
(docs/decisions/215-dates-a-question-names.md).

What counts as a date, in English and ISO form (a closed set of patterns, no guessing):
- a day: "3 May 2023", "3rd of May, 2023", "May 3, 2023", "May 3rd 2023", "2023-05-03";
- a month: "May 2023", "May, 2023", "May of 2023".
Month names may be abbreviated ("Sept 3, 2023"). A date without a year ("on May 3", "in
December") is not read: which year it means depends on when it is asked. A day that does not
exist ("30 February 2023") is not a date.

A message's time is UTC and the person's calendar is local, so a named period is widened by
`SLACK` on each side: a message said late on 3 May in New York is stored on 4 May.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

_MONTHS_TEXT = "january february march april may june july august september october november december"
MONTHS: tuple[str, ...] = tuple(_MONTHS_TEXT.split())
# Abbreviations people write ("Sept" as well as "Sep"), each with its month's number.
_ABBREVIATIONS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9}
_ABBREVIATIONS |= {"oct": 10, "nov": 11, "dec": 12}
MONTH_NUMBERS = {name: number for number, name in enumerate(MONTHS, start=1)} | _ABBREVIATIONS
SLACK = timedelta(days=1)  # the person's calendar day against the stored UTC time

_MONTH = r"(?P<month>" + "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_YEAR_LIKE = re.compile(r"\d{4}")
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Period:
    """A stretch of time a text names, UTC, `SLACK` included on both sides: [start, end)."""

    start: datetime
    end: datetime

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def named_periods(text: str) -> list[Period]:
    """The days and months `text` names, in the order found (each once)."""
    if not _YEAR_LIKE.search(text):
        return []  # every form holds a year: most texts are done here, in a microsecond
    periods: list[Period] = []
    taken: list[tuple[int, int]] = []  # spans read as days (even impossible ones): not months too
    for pattern in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR, _ISO_DAY):
        for match in pattern.finditer(text):
            taken.append(match.span())
            day = _day(match)
            period = None if day is None else _period(day, 1)
            if period is not None:
                periods.append(period)
    for match in _MONTH_YEAR.finditer(text):
        if any(start <= match.start() < end for start, end in taken):
            continue
        first = _day(match, day=1)
        period = None if first is None else _period(first, 0)
        if period is not None:
            periods.append(period)
    return list(dict.fromkeys(periods))


def said_within(moment: datetime, periods: list[Period]) -> bool:
    """Whether a message created at `moment` was said within one of `periods`."""
    return any(period.holds(moment) for period in periods)


def _day(match: re.Match[str], day: int | None = None) -> date | None:
    month_text = match.group("month").lower()
    month = int(month_text) if month_text.isdigit() else MONTH_NUMBERS[month_text]
    try:
        return date(int(match.group("year")), month, day if day is not None else int(match.group("day")))
    except ValueError:  # 30 February, month 13, year 0
        return None


def _period(first: date, days: int) -> Period | None:
    """The period from `first` for `days` days (0: to the end of its month), slack included; None
    when it would leave the calendar datetime can hold (year 1 or 9999)."""
    try:
        after = first + timedelta(days=days) if days else date(first.year + first.month // 12, first.month % 12 + 1, 1)
        start = datetime(first.year, first.month, first.day, tzinfo=UTC) - SLACK
        return Period(start, datetime(after.year, after.month, after.day, tzinfo=UTC) + SLACK)
    except (ValueError, OverflowError):
        return None
