"""The `context` column of `messages_fts` (migration 0004): a message is also found by the words of
the conversation message before it, and the index follows deletes and edits of that message."""

from __future__ import annotations

from pathlib import Path

import apsw

from klaw.store.records import MessageType, Role
from klaw.store.sqlite.migrations import bundled_migrations, migrate
from klaw.store.sqlite.query import fetch_all
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, Conversation


async def found(store: SqliteStore, text: str) -> list[int]:
    return [hit.message.rowid for hit in await store.search.full_text(ALICE, text, limit=10)]


async def indexed(store: SqliteStore) -> dict[int, tuple[str, str | None]]:
    rows = await store.db.run(lambda c: fetch_all(c, "SELECT rowid, content, context FROM messages_fts"))
    return {int(r[0]): (r[1], r[2]) for r in rows}


async def integrity_check(store: SqliteStore) -> None:
    """Raises if the index differs from what `messages_fts_source` says it should hold."""
    await store.db.run(
        lambda c: c.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
    )


async def test_a_reply_is_found_by_the_words_it_answers_below_the_message_holding_them(store: SqliteStore) -> None:
    chat = Conversation(store)
    question = await chat.say("how did the interview at the bakery go?", embed=False)
    reply = await chat.say("great, they offered me the job", Role.ASSISTANT, embed=False)
    await chat.say("congratulations!", embed=False)
    assert await found(store, "bakery interview") == [question.rowid, reply.rowid]
    assert await found(store, "job offered") == [reply.rowid, reply.rowid + 1]
    await integrity_check(store)


async def test_context_skips_tool_records_and_stops_at_a_new_segment(store: SqliteStore) -> None:
    chat = Conversation(store)
    question = await chat.say("what is the weather in lisbon?", embed=False)
    call = await chat.say(
        "weather", Role.ASSISTANT, type=MessageType.TOOL_CALL, metadata={"tool_calls": []}, embed=False
    )
    result = await chat.say("{'sky': 'clear'}", Role.TOOL, type=MessageType.TOOL_RESULT, embed=False)
    reply = await chat.say("clear skies all day", Role.ASSISTANT, embed=False)
    await chat.new_segment()
    first = await chat.say("something else", embed=False)
    entries = await indexed(store)
    assert entries[reply.rowid] == ("clear skies all day", question.content)
    assert entries[call.rowid][1] is None and entries[result.rowid][1] is None
    assert entries[first.rowid] == ("something else", None)
    await integrity_check(store)


async def test_deleting_a_message_reindexes_the_next_one_without_its_words(store: SqliteStore) -> None:
    chat = Conversation(store)
    before = await chat.say("we talked about gardening", embed=False)
    secret = await chat.say("my alarm code is zanzibarquokka", embed=False)
    reply = await chat.say("noted, I will keep it safe", Role.ASSISTANT, embed=False)
    assert await found(store, "zanzibarquokka") == [secret.rowid, reply.rowid]
    await store.db.run(lambda c: c.execute("DELETE FROM messages WHERE rowid = ?", (secret.rowid,)))
    assert await found(store, "zanzibarquokka") == []
    assert (await indexed(store))[reply.rowid] == (reply.content, before.content)
    assert await found(store, "gardening") == [before.rowid, reply.rowid]
    await integrity_check(store)


async def test_deleting_consecutive_messages_in_one_statement_keeps_the_index_exact(store: SqliteStore) -> None:
    chat = Conversation(store)
    said = [await chat.say(f"message {word} here", embed=False) for word in ("alpha", "bravo", "charlie", "delta")]
    gone = (said[1].rowid, said[2].rowid)
    await store.db.run(lambda c: c.execute("DELETE FROM messages WHERE rowid IN (?, ?)", gone))
    assert await found(store, "bravo") == [] and await found(store, "charlie") == []
    assert (await indexed(store))[said[3].rowid] == (said[3].content, said[0].content)
    await integrity_check(store)


async def test_editing_a_message_reindexes_it_and_the_next_one(store: SqliteStore) -> None:
    chat = Conversation(store)
    edited = await chat.say("the meeting is on monday", embed=False)
    after = await chat.say("ok, noted", Role.ASSISTANT, embed=False)
    update = "UPDATE messages SET content = 'the meeting is on tuesday' WHERE rowid = ?"
    await store.db.run(lambda c: c.execute(update, (edited.rowid,)))
    assert await found(store, "monday") == []
    assert await found(store, "tuesday") == [edited.rowid, after.rowid]
    await integrity_check(store)


def _version_3_database(path: Path) -> None:
    """A database as the previous klaw left it: schema 3, two chat messages and a tool result."""
    connection = apsw.Connection(str(path))
    migrate(connection, bundled_migrations()[:3])
    with connection:
        connection.execute("INSERT INTO chats (id, channel, chat_id) VALUES (1, 'console', 'alice')")
        connection.execute("INSERT INTO segments (id, chat, started_at) VALUES (1, 1, 0)")
        rows = [
            (1, "user", "text", "how was the trip to porto?"),
            (2, "tool", "tool_result", "unrelated tool output"),
            (3, "assistant", "text", "wonderful, we ate too much"),
        ]
        for rowid, role, type_, content in rows:
            connection.execute(
                "INSERT INTO messages (rowid, id, channel, chat_id, chat, segment_id, role, type, content, created_at)"
                " VALUES (?, ?, 'console', 'alice', 1, 1, ?, ?, ?, ?)",
                (rowid, f"m{rowid}", role, type_, content, rowid),
            )
    connection.close()


async def test_migration_indexes_existing_messages_with_their_context(tmp_path: Path) -> None:
    path = tmp_path / "klaw.db"
    _version_3_database(path)
    store = await SqliteStore.open(path)
    try:
        assert await store.schema_version() == len(bundled_migrations())
        assert (await indexed(store))[3] == ("wonderful, we ate too much", "how was the trip to porto?")
        assert await found(store, "porto trip") == [1, 3]
        await integrity_check(store)
    finally:
        await store.aclose()
