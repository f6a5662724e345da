"""The dates a search text names: what is read as a day or a month, what is not, and the slack
around them (a message's UTC time against the person's calendar)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from klaw.memory.named_dates import named_periods, said_within


def days(text: str) -> list[tuple[str, str]]:
    """Each period as (first day, day after the last), slack included."""
    return [(p.start.date().isoformat(), p.end.date().isoformat()) for p in named_periods(text)]


@pytest.mark.parametrize(
    "text",
    [
        "What did Gina find for her store on 1 February, 2023?",
        "on 1st of February 2023",
        "February 1, 2023",
        "Feb 1st 2023",
        "2023-02-01",
    ],
)
def test_a_day_is_read_in_its_usual_english_and_iso_forms(text: str) -> None:
    assert days(text) == [("2023-01-31", "2023-02-03")]


def test_a_month_with_its_year_is_the_whole_month_and_a_day_inside_it_is_not_read_twice() -> None:
    assert days("What did Mel paint in July 2023?") == [("2023-06-30", "2023-08-02")]
    assert days("in December, 2023") == [("2023-11-30", "2024-01-02")]
    assert days("on 3 July 2023") == [("2023-07-02", "2023-07-05")]


@pytest.mark.parametrize(
    "text",
    ["what did I say in December?", "on May 3", "May I ask about 2023?", "in 2023", "30 February 2023", "0001-01-01"],
)
def test_no_year_no_date_and_impossible_dates_are_not_read(text: str) -> None:
    assert named_periods(text) == []


def test_a_message_said_within_a_day_either_side_of_the_period_counts() -> None:
    periods = named_periods("on 1 February 2023")
    assert said_within(datetime(2023, 2, 1, 12, tzinfo=UTC), periods)
    assert said_within(datetime(2023, 2, 2, 23, 59, tzinfo=UTC), periods)  # a late evening in America
    assert not said_within(datetime(2023, 2, 3, tzinfo=UTC), periods)
    assert not said_within(datetime(2023, 1, 30, 23, tzinfo=UTC), periods)
