"""The `context` and `following` columns of `messages_fts` (migrations 0004 and 0011): a message is also
found by the words of the conversation messages before and after it, and the index follows appends,
deletes and edits of those messages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw

from klaw.store.protocol import Storage
from klaw.store.records import MessageType, Role
from klaw.store.shared.migrations import bundled_migrations
from klaw.store.sqlite.migrations import migrate
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, Conversation
from tests.store.raw import is_postgres, rows, value


async def found(store: Storage, text: str) -> list[int]:
    return [hit.message.rowid for hit in await store.search.full_text(ALICE, text, limit=10)]


async def indexed(store: Storage) -> dict[int, tuple[str, str | None, str | None]]:
    """What the full-text index holds per message: its text, its context and the following message's
    text (PostgreSQL: the columns the generated tsvector is built from)."""
    columns = "SELECT rowid, content, context, following FROM"
    # SQLite: the open segments' last messages wait in a table of their own (migration 0013).
    both = f"{columns} messages_fts UNION ALL {columns} messages_fts_last"
    sql = f"{columns} messages" if is_postgres(store) else both
    found = await rows(store, sql)
    return {int(r[0]): (r[1], r[2], r[3]) for r in found}


def _integrity_check(table: str) -> Callable[[apsw.Connection], object]:
    return lambda c: c.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")


async def integrity_check(store: Storage) -> None:
    """Raises if the index differs from what it should hold: FTS5's own check against
    `messages_fts_source`; in PostgreSQL, each message's context and following against the previous and
    next conversation messages of its segment computed afresh."""
    if not is_postgres(store):
        assert isinstance(store, SqliteStore)
        for table in ("messages_fts", "messages_fts_last"):
            await store.db.run(_integrity_check(table))
        return
    for column, side, order in (("context", "<", "DESC"), ("following", ">", "ASC")):
        wrong = await value(
            store,
            f"SELECT count(*) FROM messages m WHERE m.{column} IS DISTINCT FROM"
            " CASE WHEN klaw_is_conversation(m.type, m.role) THEN (SELECT p.content FROM messages p"
            f" WHERE p.segment_id = m.segment_id AND p.rowid {side} m.rowid"
            f" AND klaw_is_conversation(p.type, p.role) ORDER BY p.rowid {order} LIMIT 1) END",
        )
        assert wrong == 0, column


async def test_a_reply_is_found_by_the_words_it_answers_below_the_message_holding_them(storage: Storage) -> None:
    chat = Conversation(storage)
    question = await chat.say("how did the interview at the bakery go?", embed=False)
    reply = await chat.say("great, they offered me the job", Role.ASSISTANT, embed=False)
    await chat.say("congratulations!", embed=False)
    assert await found(storage, "bakery interview") == [question.rowid, reply.rowid]
    job = await found(storage, "job offered")  # then both its neighbours, by those words
    assert job[0] == reply.rowid and set(job) == {question.rowid, reply.rowid, reply.rowid + 1}
    await integrity_check(storage)


async def test_a_message_is_found_by_the_words_of_the_reply_that_names_its_topic(storage: Storage) -> None:
    """ "Went with the blue one" says nothing of a sofa; the reply after it does. Before migration 0011
    only the reply (and the message after it) held those words in the index."""
    chat = Conversation(storage)
    await chat.say("the weekend was busy", embed=False)
    choice = await chat.say("went with the blue one in the end, the cheaper of the two", embed=False)
    reply = await chat.say("good choice of sofa for the living room", Role.ASSISTANT, embed=False)
    await chat.say("thanks, it arrives on friday", embed=False)
    assert set(await found(storage, "which sofa")) == {choice.rowid, reply.rowid, reply.rowid + 1}
    assert (await found(storage, "which sofa"))[0] == reply.rowid
    entries = await indexed(storage)
    assert entries[choice.rowid] == (choice.content, "the weekend was busy", reply.content)
    assert entries[reply.rowid + 1][2] is None  # the last message: nothing follows yet
    await integrity_check(storage)


async def test_context_skips_tool_records_and_stops_at_a_new_segment(storage: Storage) -> None:
    chat = Conversation(storage)
    question = await chat.say("what is the weather in lisbon?", embed=False)
    call = await chat.say(
        "weather", Role.ASSISTANT, type=MessageType.TOOL_CALL, metadata={"tool_calls": []}, embed=False
    )
    result = await chat.say("{'sky': 'clear'}", Role.TOOL, type=MessageType.TOOL_RESULT, embed=False)
    reply = await chat.say("clear skies all day", Role.ASSISTANT, embed=False)
    await chat.new_segment()
    first = await chat.say("something else", embed=False)
    entries = await indexed(storage)
    assert entries[question.rowid] == (question.content, None, "clear skies all day")
    assert entries[reply.rowid] == ("clear skies all day", question.content, None)
    assert entries[call.rowid][1:] == (None, None) and entries[result.rowid][1:] == (None, None)
    assert entries[first.rowid] == ("something else", None, None)
    await integrity_check(storage)


async def test_deleting_a_message_reindexes_the_next_one_without_its_words(storage: Storage) -> None:
    chat = Conversation(storage)
    before = await chat.say("we talked about gardening", embed=False)
    secret = await chat.say("my alarm code is zanzibarquokka", embed=False)
    reply = await chat.say("noted, I will keep it safe", Role.ASSISTANT, embed=False)
    quokka = await found(storage, "zanzibarquokka")
    assert quokka[0] == secret.rowid and set(quokka) == {secret.rowid, before.rowid, reply.rowid}
    await rows(storage, "DELETE FROM messages WHERE rowid = ?", secret.rowid)
    assert await found(storage, "zanzibarquokka") == []
    entries = await indexed(storage)
    assert entries[reply.rowid] == (reply.content, before.content, None)
    assert entries[before.rowid] == (before.content, None, reply.content)
    assert await found(storage, "gardening") == [before.rowid, reply.rowid]
    assert await found(storage, "safe") == [reply.rowid, before.rowid]
    await integrity_check(storage)


async def test_deleting_consecutive_messages_in_one_statement_keeps_the_index_exact(storage: Storage) -> None:
    chat = Conversation(storage)
    said = [await chat.say(f"message {word} here", embed=False) for word in ("alpha", "bravo", "charlie", "delta")]
    gone = (said[1].rowid, said[2].rowid)
    await rows(storage, "DELETE FROM messages WHERE rowid IN (?, ?)", *gone)
    assert await found(storage, "bravo") == [] and await found(storage, "charlie") == []
    entries = await indexed(storage)
    assert entries[said[3].rowid] == (said[3].content, said[0].content, None)
    assert entries[said[0].rowid] == (said[0].content, None, said[3].content)
    await integrity_check(storage)


async def test_editing_a_message_reindexes_it_and_the_next_one(storage: Storage) -> None:
    chat = Conversation(storage)
    before = await chat.say("when do we meet?", embed=False)
    edited = await chat.say("the meeting is on monday", embed=False)
    after = await chat.say("ok, noted", Role.ASSISTANT, embed=False)
    update = "UPDATE messages SET content = 'the meeting is on tuesday' WHERE rowid = ?"
    await rows(storage, update, edited.rowid)
    assert await found(storage, "monday") == []
    tuesday = await found(storage, "tuesday")
    assert tuesday[0] == edited.rowid and set(tuesday) == {edited.rowid, before.rowid, after.rowid}
    await integrity_check(storage)


def _version_3_database(path: Path) -> None:
    """A database as the previous klaw left it: schema 3, two chat messages and a tool result."""
    connection = apsw.Connection(str(path))
    migrate(connection, bundled_migrations("klaw.store.sqlite")[:3])
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
        assert await store.schema_version() == len(bundled_migrations("klaw.store.sqlite"))
        entries = await indexed(store)
        assert entries[3] == ("wonderful, we ate too much", "how was the trip to porto?", None)
        assert entries[1] == ("how was the trip to porto?", None, "wonderful, we ate too much")
        assert await found(store, "porto trip") == [1, 3]
        assert await found(store, "ate too much") == [3, 1]
        await integrity_check(store)
    finally:
        await store.aclose()
