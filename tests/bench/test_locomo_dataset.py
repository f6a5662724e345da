"""Reading LoCoMo-format files: what the bench indexes, and clear errors for files that break the format."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from klaw.bench.locomo.dataset import DataSource, LocomoFormatError, load_locomo, parse_locomo, parse_session_date
from klaw.bench.locomo.runner import conversation_records
from klaw.store.records import Role

SOURCE = DataSource("t.json", 0, "0" * 64)


def conversation(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sample_id": "c1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_2_date_time": "12:05 am on 1 June, 2023",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "later"}],
            "session_10_date_time": "12:30 pm on 3 June, 2023",
            "session_10": [{"speaker": "Ann", "dia_id": "D10:1", "text": "last"}],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "hello"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "look", "blip_caption": "a photo of a boat"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "nice", "blip_caption": "  "},
            ],
            "session_11_date_time": "2:00 pm on 4 June, 2023",  # a date without a session: ignored
        },
        "qa": [
            {"question": "q?", "answer": 3, "evidence": ["D1:2"], "category": 4},
            {"question": "q2?", "adversarial_answer": "x", "evidence": ["D5:5"], "category": 5},
        ],
    }
    base.update(overrides)
    return base


def test_sessions_in_numeric_order_dated_turns_one_second_apart_with_captions() -> None:
    dataset = parse_locomo([conversation()], SOURCE)
    (conv,) = dataset.conversations
    assert [s.number for s in conv.sessions] == [1, 2, 10]
    records = conversation_records(conv)
    assert [(r.content, dia) for r, dia in records] == [
        ("Ann: hello", "D1:1"),
        ("Bo: look [shares a photo of a boat]", "D1:2"),
        ("Ann: nice", "D1:3"),
        ("Bo: later", "D2:1"),
        ("Ann: last", "D10:1"),
    ]
    assert [r.created_at for r, _ in records[:3]] == [datetime(2023, 5, 8, 13, 56, s, tzinfo=UTC) for s in range(3)]
    assert records[3][0].created_at == datetime(2023, 6, 1, 0, 5, tzinfo=UTC)
    assert {r.role for r, _ in records} == {Role.USER}
    assert len({r.chat for r, _ in records}) == 1
    assert conv.session_of() == {"D1:1": 1, "D1:2": 1, "D1:3": 1, "D2:1": 2, "D10:1": 10}
    assert [q.index for q in conv.questions] == [0]
    assert [(s.index, s.category, s.unresolved) for s in conv.skipped] == [(1, 5, ("D5:5",))]
    assert (dataset.turn_count, dataset.question_count) == (5, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:04 am on 1 January, 2024", datetime(2024, 1, 1, 0, 4, tzinfo=UTC)),
        ("12:40 PM on 29 February, 2024", datetime(2024, 2, 29, 12, 40, tzinfo=UTC)),
        ("9:05 am on 3 Sept 2023", datetime(2023, 9, 3, 9, 5, tzinfo=UTC)),
    ],
)
def test_session_dates(text: str, expected: datetime) -> None:
    assert parse_session_date(text) == expected


@pytest.mark.parametrize("text", ["13:00 pm on 8 May, 2023", "1:56 on 8 May, 2023", "1:56 pm on 8 Mai, 2023", ""])
def test_bad_session_dates(text: str) -> None:
    with pytest.raises(ValueError, match="1:56 pm on 8 May, 2023"):
        parse_session_date(text)


def broken(path: list[Any], value: Any) -> dict[str, Any]:
    """A copy of `conversation()` with the value at `path` replaced (`...` deletes it)."""
    data = copy.deepcopy(conversation())
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"not": "a list"}, "top level must be a non-empty list"),
        ([], "top level must be a non-empty list"),
        (["x"], r"conversation \[0\]: must be an object"),
        ([broken(["sample_id"], ...)], "'sample_id' must be a non-empty string"),
        ([broken(["conversation"], [])], r"\(c1\): 'conversation' must be an object"),
        ([broken(["conversation", "session_2"], "x")], "'session_2' must be a list of turns"),
        ([broken(["conversation", "session_2_date_time"], ...)], "'session_2_date_time' is missing"),
        ([broken(["conversation", "session_1_date_time"], "yesterday")], "'session_1_date_time': 'yesterday'"),
        ([broken(["conversation", "session_1", 1, "text"], None)], r"session_1\[1\]: 'text' is missing"),
        ([broken(["conversation", "session_1", 0, "dia_id"], "D2:1")], "dia_id 'D2:1' appears twice"),
        ([broken(["conversation", "session_1", 1, "blip_caption"], ["x"])], "'blip_caption' must be a string"),
        ([{"sample_id": "c1", "conversation": {}, "qa": []}], "no 'session_<n>' list with turns"),
        ([broken(["qa"], {})], "'qa' must be a list"),
        ([broken(["qa", 0, "category"], "4")], r"qa\[0\]: 'category' must be an integer, got str"),
        ([broken(["qa", 0, "category"], True)], "'category' must be an integer, got bool"),
        ([broken(["qa", 1, "evidence"], "D1:1")], r"qa\[1\]: 'evidence' must be a list"),
        ([broken(["qa", 0, "question"], "")], "'question' is missing"),
        ([conversation(), conversation()], "sample_id 'c1' appears twice"),
    ],
)
def test_format_errors_name_where_and_what(data: Any, message: str) -> None:
    with pytest.raises(LocomoFormatError, match=message):
        parse_locomo(data, SOURCE)


def test_load_reads_the_file_and_fingerprints_it(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([conversation()]), encoding="utf-8")
    dataset = load_locomo(path)
    assert dataset.source.name == "mine.json"
    assert dataset.source.bytes == path.stat().st_size
    assert len(dataset.source.sha256) == 64
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(LocomoFormatError, match=r"mine\.json: not JSON"):
        load_locomo(path)
