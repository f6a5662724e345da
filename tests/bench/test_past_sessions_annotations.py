"""Reading LoCoMo's session summaries and observations, and the texts the past-sessions bench stores."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from klaw.bench.locomo.annotations import Fact, parse_session_notes
from klaw.bench.locomo.dataset import DataSource, LocomoFormatError, parse_locomo
from klaw.bench.locomo.past_sessions_chat import exchange_position, exchange_texts, renamer, summary_count

FIXTURE = Path(__file__).parent.parent / "fixtures" / "past_sessions_tiny.json"
SOURCE = DataSource("tiny.json", 0, "0" * 64)


def raw() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def test_summaries_and_facts_by_session() -> None:
    data = raw()
    notes = parse_session_notes(data, parse_locomo(data, SOURCE))
    a, b = notes["tiny-a"], notes["tiny-b"]
    assert sorted(a.summaries) == [1, 2]  # session_9 has no turns
    assert a.facts[1] == (
        Fact("Ada hiked to the glacier lake and camped overnight.", "D1:1"),
        Fact("Ada camped in a red tent her uncle lent her.", "D1:3"),
    )
    # A fact naming a turn of another session, or no turn at all, is dropped; evidence may be a list.
    assert b.facts[2] == (
        Fact("Di's garden tomatoes turned ripe.", "D2:1"),
        Fact("Cy wants tomatoes for a salad.", "D2:2"),
    )


def test_missing_annotations_are_empty() -> None:
    data = raw()
    for item in data:
        del item["session_summary"], item["observation"]
    notes = parse_session_notes(data, parse_locomo(data, SOURCE))
    assert all(not n.summaries and not n.facts for n in notes.values())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda item: item.update(session_summary=["x"]), "tiny-a: 'session_summary' must be an object"),
        (lambda item: item["session_summary"].update(session_1_summary=3), "session_summary.session_1_summary must"),
        (lambda item: item.update(observation="x"), "tiny-a: 'observation' must be an object"),
        (lambda item: item["observation"].update(session_1_observation=[]), "observation.session_1_observation must"),
        (lambda item: item["observation"]["session_1_observation"].update(Ada="x"), "session_1_observation[0] must"),
        (lambda item: item["observation"]["session_1_observation"]["Ada"].append(["no evidence"]), "[text, evidence]"),
    ],
)
def test_broken_annotations_name_where(change: Any, message: str) -> None:
    data = raw()
    dataset = parse_locomo(copy.deepcopy(data), SOURCE)
    change(data[0])
    with pytest.raises(LocomoFormatError, match=message.replace("[", r"\[").replace("]", r"\]")) as error:
        parse_session_notes(data, dataset)
    assert "glacier" not in str(error.value)  # keys and positions, never the text


def test_a_conversation_missing_from_the_file() -> None:
    data = raw()
    dataset = parse_locomo(data, SOURCE)
    with pytest.raises(LocomoFormatError, match="tiny-b: not in the file"):
        parse_session_notes(data[:1], dataset)


def test_exchanges_pair_turns_and_take_their_facts() -> None:
    data = raw()
    dataset = parse_locomo(data, SOURCE)
    notes = parse_session_notes(data, dataset)["tiny-a"]
    conversation = dataset.conversations[0]
    session = conversation.sessions[1]
    assert exchange_texts(session, notes, "turns") == [
        "Bo: I baked sourdough bread with rye flour.\nAda: Please send me the recipe for the rye loaf.",
        "Bo: Will do tomorrow.",
    ]
    assert exchange_texts(session, notes, "facts") == [
        "Bo baked sourdough bread with rye flour. Ada asked Bo for the rye loaf recipe.",
        None,
    ]
    assert exchange_position(conversation)["D2:3"] == (2, 1)
    assert exchange_position(conversation)["D1:4"] == (1, 1)
    assert (summary_count(conversation, notes, "turns"), summary_count(conversation, notes, "facts")) == (6, 5)


def test_neutral_names_replace_whole_names_only() -> None:
    conversation = parse_locomo(raw(), SOURCE).conversations[0]
    neutral = renamer(conversation, "neutral")
    assert neutral("Ada told Bo about Ada's tent; Adam and Bob stay.") == (
        "the person told the assistant about the person's tent; Adam and Bob stay."
    )
    assert renamer(conversation, "kept")("Ada told Bo") == "Ada told Bo"
