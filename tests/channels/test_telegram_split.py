"""Splitting replies at Telegram's 4096-unit limit: paragraph, then line, then word, then hard."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from klaw.channels.telegram_split import TELEGRAM_MESSAGE_LIMIT, reply_parts, split_message, utf16_length


def test_short_text_is_one_part_and_blank_text_none() -> None:
    assert split_message("hello") == ["hello"]
    assert split_message("   \n") == []
    assert split_message("x" * TELEGRAM_MESSAGE_LIMIT) == ["x" * TELEGRAM_MESSAGE_LIMIT]


def test_cuts_at_a_paragraph_break_in_the_second_half() -> None:
    text = "a" * 60 + "\n\n" + "b" * 30 + "\n" + "c" * 30
    assert split_message(text, limit=100) == ["a" * 60, "b" * 30 + "\n" + "c" * 30]


def test_a_line_break_when_no_paragraph_break_is_late_enough() -> None:
    text = "a" * 10 + "\n\n" + "b" * 60 + "\n" + "c" * 50
    assert split_message(text, limit=100) == ["a" * 10 + "\n\n" + "b" * 60, "c" * 50]


def test_a_space_then_a_hard_cut() -> None:
    assert split_message("word " * 30, limit=20) == ["word word word word"] * 7 + ["word word "]
    assert split_message("x" * 45, limit=20) == ["x" * 20, "x" * 20, "x" * 5]


def test_lengths_count_utf16_units_like_telegram() -> None:
    emoji = "😀"  # outside the basic plane: two units
    assert utf16_length(emoji * 3) == 6
    parts = split_message(emoji * 5, limit=4)
    assert parts == [emoji * 2, emoji * 2, emoji]


def test_indentation_is_kept_after_a_line_cut() -> None:
    code = "def f():\n" + "    x = 1\n" * 20
    parts = split_message(code, limit=60)
    assert all(part.startswith(("def", "    x")) for part in parts)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \n😀é"), max_size=400), st.integers(min_value=2, max_value=50))
def test_parts_fit_and_only_separators_are_lost(text: str, limit: int) -> None:
    parts = split_message(text, limit=limit)
    assert all(0 < utf16_length(part) <= limit for part in parts)
    squeezed = "".join(text.split())
    assert "".join("".join(parts).split()) == squeezed


def test_a_reply_is_at_most_its_parts_then_one_naming_what_was_cut() -> None:
    assert reply_parts("x" * (2 * TELEGRAM_MESSAGE_LIMIT), max_parts=2) == ["x" * TELEGRAM_MESSAGE_LIMIT] * 2
    parts = reply_parts("x" * (3 * TELEGRAM_MESSAGE_LIMIT + 5), max_parts=2)
    assert parts[:2] == ["x" * TELEGRAM_MESSAGE_LIMIT] * 2
    assert parts[2].startswith(f"(Reply cut here: {TELEGRAM_MESSAGE_LIMIT + 5:,} more characters were not sent")
