"""Migration 0013: an append only inserts into `messages_fts` (the open segments' last messages wait in
`messages_fts_last`), a last message scores what its entry would score in `messages_fts`, and a home
of schema 11 finds the same messages in the same order after the migration (decision 218)."""

from __future__ import annotations

from pathlib import Path

import apsw

from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from klaw.store.shared.migrations import bundled_migrations
from klaw.store.sqlite.full_text import _BM25
from klaw.store.sqlite.migrations import migrate
from klaw.store.sqlite.query import fetch_all
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.tokenizers import TOKENIZE_OPTIONS, _recreate, indexed_tokenizer
from tests.store.test_fts_context import indexed, integrity_check

ALICE = ChatRef("console", "alice")
BOB = ChatRef("telegram", "bob")
TEXTS = [
    "we planted tomatoes and basil in the garden",
    "how tall are the tomato plants now?",
    "knee high, the basil is doing better than the tomatoes",
    "pinch the basil flowers so it keeps growing",
]


async def test_an_append_deletes_nothing_from_the_full_text_index(store: SqliteStore) -> None:
    """Before, each conversation message re-indexed the one before it: an FTS5 'delete' (its
    `messages_fts_docsize` row goes), costly with secure-delete. Now the index only gains rows."""
    deleted: list[tuple[str, int]] = []

    def watch(connection: apsw.Connection) -> None:
        def hook(kind: int, _database: str, table: str, rowid: int) -> None:
            if kind == apsw.SQLITE_DELETE and table.startswith("messages_fts") and table != "messages_fts_last_docsize":
                deleted.append((table, rowid))

        connection.set_update_hook(hook)

    await store.db.run(watch)
    for i, text in enumerate(TEXTS):
        await store.messages.append(MessageRecord(ALICE, Role.USER if i % 2 == 0 else Role.ASSISTANT, text))
    await store.messages.append_many([MessageRecord(BOB, Role.USER, text) for text in TEXTS])
    await store.db.run(lambda c: c.set_update_hook(None))
    assert deleted == []
    entries = await indexed(store)
    assert entries[2] == (TEXTS[1], TEXTS[0], TEXTS[2])  # each entry whole, its next message included
    assert entries[4] == (TEXTS[3], TEXTS[2], None)
    await integrity_check(store)


async def test_a_last_message_scores_what_its_entry_scores_in_the_index(store: SqliteStore) -> None:
    """Bob's segment ended, so his last message is in `messages_fts`; Alice's same words wait in
    `messages_fts_last`: the two scores are the same number, both with `messages_fts`'s statistics."""
    await store.messages.append_many([MessageRecord(BOB, Role.USER, text) for text in TEXTS])
    await store.messages.append(MessageRecord(BOB, Role.SYSTEM, "", type=MessageType.SESSION_BREAK))
    alice = await store.messages.append_many([MessageRecord(ALICE, Role.USER, text) for text in TEXTS])
    bob_hits = await store.search.full_text(BOB, "basil flowers", limit=10)
    alice_hits = await store.search.full_text(ALICE, "basil flowers", limit=10)
    assert [h.message.content for h in alice_hits] == [h.message.content for h in bob_hits]
    assert alice_hits[0].message.rowid == alice[-1].rowid  # the last message, from the small table
    assert [h.score for h in alice_hits] == [h.score for h in bob_hits]


def _schema_11_home(path: Path, tokenizer: str | None = None) -> list[tuple[int, float]]:
    """A database as klaw before migration 0013 left it: two chats, one of them with an ended segment
    (its messages indexed with `tokenizer`, a `TOKENIZE_OPTIONS` value, when given); returns the
    plain bm25 ranking of a query over Alice's messages there."""
    connection = apsw.Connection(str(path))
    migrate(connection, bundled_migrations("klaw.store.sqlite")[:11])
    if tokenizer is not None:
        with connection:
            for table in ("messages_fts", "memory_chunks_fts"):
                _recreate(connection, table, tokenizer)
    with connection:
        connection.execute("INSERT INTO chats (id, channel, chat_id) VALUES (1, 'console', 'alice'), (2, 'tg', 'bob')")
        connection.execute(
            "INSERT INTO segments (id, chat, started_at, ended_at) VALUES (1, 1, 0, 10), (2, 1, 10, NULL)"
        )
        connection.execute("INSERT INTO segments (id, chat, started_at) VALUES (3, 2, 0)")
        rowid = 0
        for segment, chat, texts in ((1, 1, TEXTS[:2]), (2, 1, TEXTS[1:]), (3, 2, TEXTS)):
            for text in texts:
                rowid += 1
                connection.execute(
                    "INSERT INTO messages (rowid, id, channel, chat_id, chat, segment_id, role, type, content,"
                    " created_at) VALUES (?, ?, 'x', 'x', ?, ?, 'user', 'text', ?, ?)",
                    (rowid, f"m{rowid}", chat, segment, text, rowid),
                )
    ranking = fetch_all(
        connection,
        f"SELECT m.rowid, {_BM25} AS score FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
        ' WHERE messages_fts MATCH \'"basil" OR "tomato"\' AND m.chat = 1 ORDER BY score, m.rowid',
    )
    connection.close()
    return [(int(r), float(s)) for r, s in ranking]


async def test_a_home_of_schema_11_finds_the_same_messages_in_the_same_order(tmp_path: Path) -> None:
    path = tmp_path / "klaw.db"
    before = _schema_11_home(path)
    store = await SqliteStore.open(path)
    try:
        last = await store.db.run(lambda c: fetch_all(c, "SELECT rowid FROM messages_fts_last ORDER BY rowid"))
        assert last == [(5,), (9,)]  # the last message of each open segment, not of the ended one
        await integrity_check(store)
        after = await store.search.full_text(ALICE, "basil tomato", limit=10)
        assert [h.message.rowid for h in after] == [rowid for rowid, _ in before]
    finally:
        await store.aclose()


async def test_a_trigram_home_gets_its_last_messages_cut_into_trigrams_too(tmp_path: Path) -> None:
    """Migration 0013's SQL creates the small table with `porter`; a home whose messages are indexed
    as trigrams gets it made again with trigrams at open, not refused as a mismatch."""
    path = tmp_path / "klaw.db"
    before = _schema_11_home(path, TOKENIZE_OPTIONS["trigram"])
    store = await SqliteStore.open(path, tokenizer="trigram")
    try:
        assert await store.db.run(lambda c: indexed_tokenizer(c, "messages_fts_last")) == "trigram"
        await integrity_check(store)
        after = await store.search.full_text(ALICE, "basil tomato", limit=10)
        assert [h.message.rowid for h in after] == [rowid for rowid, _ in before]
    finally:
        await store.aclose()


async def test_a_segment_that_ends_or_opens_again_moves_its_last_message_between_the_tables(
    store: SqliteStore,
) -> None:
    """The two segment triggers (migration 0014's `segment_last_message`): ending Bob's segment moves
    his last message into `messages_fts` with no following text; opening it again (klaw never does,
    a hand-edited database might) moves it back; Alice's open segment is untouched throughout."""
    alice = await store.messages.append_many([MessageRecord(ALICE, Role.USER, text) for text in TEXTS[:2]])
    bob = await store.messages.append_many([MessageRecord(BOB, Role.USER, text) for text in TEXTS])

    async def last_table() -> list[int]:
        found = await store.db.run(lambda c: fetch_all(c, "SELECT rowid FROM messages_fts_last ORDER BY rowid"))
        return [int(r[0]) for r in found]

    assert await last_table() == [alice[-1].rowid, bob[-1].rowid]
    await store.messages.append(MessageRecord(BOB, Role.SYSTEM, "", type=MessageType.SESSION_BREAK))
    assert await last_table() == [alice[-1].rowid]
    assert (await indexed(store))[bob[-1].rowid] == (TEXTS[3], TEXTS[2], None)
    await integrity_check(store)

    segment = bob[-1].segment_id
    await store.db.run(lambda c: c.execute("UPDATE segments SET ended_at = NULL WHERE id = ?", (segment,)))
    assert await last_table() == [alice[-1].rowid, bob[-1].rowid]
    await integrity_check(store)
