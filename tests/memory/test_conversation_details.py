"""fetch_conversation_details' data (memory/conversation_details.py): a segment or an exchange of the
asking chat, with or without the full transcript, summaries when there are, results kept small."""

from __future__ import annotations

import json

import pytest

from klaw.home import KlawHome
from klaw.memory.conversation_details import MAX_RESULT_CHARS, ConversationDetails, DetailsError
from klaw.store.sqlite.store import SqliteStore
from tests.memory.archive_helpers import ME, OTHER, ScriptedChat


class Summaries:
    async def segment_summary(self, segment_id: int) -> str | None:
        return f"segment {segment_id} was about the trip"

    async def exchange_summary(self, exchange_id: int) -> str | None:
        return None if exchange_id % 2 else f"exchange {exchange_id} in brief"


async def test_an_exchange_with_and_without_its_transcript(home: KlawHome, store: SqliteStore) -> None:
    chat = ScriptedChat(home, store)
    burst = await chat.say("we fly to Porto on may 3")
    turn = await chat.turn(
        "book a hotel near the river",
        reply="Booked Casa do Rio.",
        pending=[burst],
        tools=[("hotel_search", "Casa do Rio, 2 nights")],
        memories=["trip: Porto, May 3"],
    )
    exchange_id = await chat.exchange_id(turn)
    details = ConversationDetails(store, Summaries())

    brief = await details.fetch(ME, segment_id=None, exchange_id=exchange_id, full_transcript=False)
    assert brief["exchange_id"] == exchange_id and brief["segment_id"] == turn.opened.segment_id
    assert brief["user_message"] == "we fly to Porto on may 3\nbook a hotel near the river"
    assert brief["assistant_message"] == "Booked Casa do Rio."
    assert brief["status"] == "completed" and "messages" not in brief
    assert brief["started_at"] == turn.opened.record.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")

    full = await details.exchange(ME, exchange_id, full_transcript=True)
    assert [(m["role"], m.get("content"), m.get("tool")) for m in full["messages"]] == [
        ("user", "we fly to Porto on may 3", None),
        ("user", "book a hotel near the river", None),
        ("assistant", None, None),
        ("tool", "Casa do Rio, 2 nights", "hotel_search"),
        ("assistant", "Booked Casa do Rio.", None),
    ]
    assert full["messages"][2]["tool_calls"][0]["name"] == "hotel_search"


async def test_a_segment_lists_its_exchanges_in_order_with_summaries(home: KlawHome, store: SqliteStore) -> None:
    chat = ScriptedChat(home, store)
    first = await chat.turn("plan the Porto trip", reply="Let's start with flights.")
    second = await chat.turn("and the hotel?", reply=None)  # failed turn: no reply
    await chat.new_segment()
    await chat.turn("unrelated", reply="sure")
    details = ConversationDetails(store, Summaries())
    view = await details.segment(ME, first.opened.segment_id, full_transcript=False)
    assert view["summary"] == f"segment {first.opened.segment_id} was about the trip"
    assert view["current"] is False and view["ended_at"] is not None
    assert [e["exchange_id"] for e in view["exchanges"]] == [
        await chat.exchange_id(first),
        await chat.exchange_id(second),
    ]
    assert [(e["user_message"], e["assistant_message"], e["status"]) for e in view["exchanges"]] == [
        ("plan the Porto trip", "Let's start with flights.", "completed"),
        ("and the hotel?", None, "failed"),
    ]
    full = await details.segment(ME, first.opened.segment_id, full_transcript=True)
    transcript = [m["content"] for m in full["exchanges"][0]["messages"]]
    assert transcript == ["plan the Porto trip", "Let's start with flights."]


async def test_unknown_ids_and_other_chats_ids_are_the_same_clear_error(home: KlawHome, store: SqliteStore) -> None:
    chat = ScriptedChat(home, store)
    theirs = await chat.turn("their private matter", reply="ok", chat=OTHER)
    details = ConversationDetails(store)
    for segment_id in (theirs.opened.segment_id, 999):
        with pytest.raises(DetailsError, match=f"no segment {segment_id} in this chat"):
            await details.fetch(ME, segment_id=segment_id, exchange_id=None, full_transcript=False)
    for exchange_id in (await chat.exchange_id(theirs), 999):
        with pytest.raises(DetailsError, match=f"no exchange {exchange_id} in this chat"):
            await details.fetch(ME, segment_id=None, exchange_id=exchange_id, full_transcript=True)
    with pytest.raises(DetailsError, match="give segment_id or exchange_id"):
        await details.fetch(ME, segment_id=None, exchange_id=None, full_transcript=False)


async def test_a_long_segment_stays_under_the_result_budget_and_names_the_rest(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    turns = [await chat.turn(f"question {n} " + "word " * 400, reply="answer " * 400) for n in range(20)]
    view = await ConversationDetails(store).segment(ME, turns[0].opened.segment_id, full_transcript=True)
    assert len(json.dumps(view)) <= MAX_RESULT_CHARS + 2000
    shown = [e["exchange_id"] for e in view["exchanges"]]
    assert shown and shown + view["more_exchange_ids"] == [await chat.exchange_id(t) for t in turns]
    assert "fetch the others with exchange_id" in view["note"]
