"""Control characters in text bound for a terminal are shown, never obeyed, and nothing else changes."""

from __future__ import annotations

from klaw.terminal_text import visible


def test_controls_become_visible_stand_ins_and_ordinary_text_is_untouched() -> None:
    assert visible("RM -RF\x1b[2K\rhello\x07") == "RM -RF␛[2K␍hello␇"
    assert visible("a\x9bb\x7fc") == "a\\x9bb␡c"
    assert visible("abc\u202edef") == "abc\\u202edef"  # a right-to-left override would reorder the line
    ordinary = "line two\n\tindented, «ünïcode» 中文 🙂"
    assert visible("line one\r\n" + ordinary) == "line one\n" + ordinary
