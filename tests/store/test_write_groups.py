"""Appends queued side by side on the database thread commit together (decision 353, write_queue.py).

With many chats at once the turns' appends wait on the one database thread; each was its own
transaction. Here the thread is held while appends of several chats queue behind it (what 50 chats
at once do), then released: they are stored in one commit, each caller gets its own message, a read
queued between two appends still sees the first and not the second, and a group one of whose calls
fails is rolled back and run again call by call, so the failure is that call's alone and the chat a
rolled-back append created is created again (not a key left over from the rollback). On the old code
every append was a commit of its own: the first test counts 24 commits.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.store.held_thread import thread_held

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HELD_SECONDS = 60.0  # a safety net: the test releases the thread itself


def said(chat: ChatRef, n: int) -> MessageRecord:
    return MessageRecord(chat, Role.USER, f"message {n} from {chat.chat_id}", created_at=T0 + timedelta(seconds=n))


async def commits(store: SqliteStore) -> list[int]:
    """A list that counts the commits of the store's connection from now on."""
    counted: list[int] = []

    def hook() -> bool:
        counted.append(1)
        return False  # False: go on and commit

    await store.db.run(lambda connection: connection.set_commit_hook(hook))
    return counted


async def contents(store: SqliteStore, chat: ChatRef) -> list[str]:
    """The chat's messages as stored, through its chat row (a message whose key names no chat row is not here)."""
    rows = await store.db.run(
        lambda connection: connection.execute(
            "SELECT m.content FROM messages m JOIN chats c ON c.id = m.chat"
            " WHERE c.channel = ? AND c.chat_id = ? ORDER BY m.rowid",
            (chat.channel, chat.chat_id),
        ).fetchall()
    )
    return [str(row[0]) for row in rows]


async def queued(n: int = 0) -> None:
    """Let the tasks just created reach the database thread's queue."""
    for _ in range(20 + n):
        await asyncio.sleep(0)


async def test_appends_of_many_chats_queued_together_are_one_commit(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        chats = [ChatRef("console", f"chat{i}") for i in range(8)]
        await store.messages.append_many([said(chat, 0) for chat in chats])  # the chats exist
        counted = await commits(store)
        async with thread_held(store, HELD_SECONDS):
            appends = [
                asyncio.ensure_future(store.messages.append(said(chat, n), embed=True))
                for n in (1, 2, 3)
                for chat in chats
            ]
            await queued(len(appends))
        stored = await asyncio.gather(*appends)

        assert len(counted) <= 2, f"{len(counted)} commits for {len(appends)} appends queued together"
        assert len({m.rowid for m in stored}) == len(appends)
        for message, task_record in zip(stored, (said(chat, n) for n in (1, 2, 3) for chat in chats), strict=True):
            assert message.record.content == task_record.content
        for chat in chats:
            assert await contents(store, chat) == [f"message {n} from {chat.chat_id}" for n in range(4)]
        jobs = await store.embedding_jobs.claim_texts(datetime.now(UTC) + timedelta(days=1), 100, timedelta(minutes=1))
        assert len(jobs) == len(appends)  # each append's embedding job stored with it
    finally:
        await store.aclose()


async def test_a_read_queued_between_two_appends_sees_the_first_only(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    chat = ChatRef("console", "alice")
    try:
        await store.messages.append(said(chat, 0))
        async with thread_held(store, HELD_SECONDS):
            first = asyncio.ensure_future(store.messages.append(said(chat, 1)))
            await queued()
            count = asyncio.ensure_future(
                store.db.run(lambda connection: connection.execute("SELECT count(*) FROM messages").fetchall()[0][0])
            )
            await queued()
            second = asyncio.ensure_future(store.messages.append(said(chat, 2)))
            await queued()
        await asyncio.gather(first, second)
        assert await count == 2
    finally:
        await store.aclose()


async def test_a_failing_call_fails_alone_and_a_new_chat_is_made_again(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    new_chat, other = ChatRef("console", "new"), ChatRef("console", "other")
    try:
        await store.messages.append(said(other, 0))

        def fails(_connection: apsw.Connection) -> None:
            raise ValueError("this write fails")

        async with thread_held(store, HELD_SECONDS):
            # The new chat's first append makes its row; its second finds that row (not yet committed)
            # and would keep its key; then a call fails and the group is rolled back.
            made = asyncio.ensure_future(store.messages.append(said(new_chat, 0)))
            found = asyncio.ensure_future(store.messages.append(said(new_chat, 1)))
            beside = asyncio.ensure_future(store.messages.append(said(other, 1)))
            failing = asyncio.ensure_future(store.db.run(fails, grouped=True))
            await queued(4)
        await asyncio.gather(made, found, beside)
        with pytest.raises(ValueError, match="this write fails"):
            await failing

        assert await contents(store, new_chat) == [
            "message 0 from new",
            "message 1 from new",
        ]
        assert await contents(store, other) == ["message 0 from other", "message 1 from other"]
        chat_rows = await store.db.run(
            lambda connection: connection.execute("SELECT count(*) FROM chats WHERE chat_id = 'new'").fetchall()
        )
        assert chat_rows == [(1,)]
        dangling = await store.db.run(
            lambda connection: connection.execute(
                "SELECT count(*) FROM messages WHERE chat NOT IN (SELECT id FROM chats)"
            ).fetchall()
        )
        assert dangling == [(0,)]
    finally:
        await store.aclose()


async def test_a_group_opens_no_savepoints_and_one_alone_none_inside_its_transaction(tmp_path: Path) -> None:
    """Decision 385: FTS5 writes its pending terms out as a segment at every savepoint, so the appends of a
    group (and the two records of one `append_many`) run in their transaction without one. On the old
    code each call's `with connection:` blocks were savepoints: 2-3 for each append here."""
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        chats = [ChatRef("console", f"chat{i}") for i in range(4)]
        await store.messages.append_many([said(chat, 0) for chat in chats])
        statements: list[str] = []

        def trace(event: dict[str, object]) -> None:
            statements.append(str(event.get("sql") or ""))

        await store.db.run(lambda connection: connection.trace_v2(apsw.SQLITE_TRACE_STMT, trace))
        async with thread_held(store, HELD_SECONDS):
            appends: list[asyncio.Future[object]] = [
                asyncio.ensure_future(store.messages.append(said(chat, 1), embed=True)) for chat in chats
            ]
            appends += [
                asyncio.ensure_future(store.messages.append_many([said(chat, 2), said(chat, 3)])) for chat in chats
            ]
            await queued(len(appends))
        await asyncio.gather(*appends)
        await store.messages.append_many([said(chats[0], 4), said(chats[0], 5)])  # a grouped call alone
        await store.db.run(lambda connection: connection.trace_v2(0, None))

        savepoints = [sql for sql in statements if "SAVEPOINT" in sql.upper()]
        assert savepoints == [], f"{len(savepoints)} savepoint statements for {len(appends) + 1} grouped calls"
        for chat in chats[1:]:
            assert await contents(store, chat) == [f"message {n} from {chat.chat_id}" for n in range(4)]
        assert await contents(store, chats[0]) == [f"message {n} from chat0" for n in range(6)]
    finally:
        await store.aclose()


async def test_an_error_a_grouped_call_catches_still_undoes_its_block(tmp_path: Path) -> None:
    """A call that catches an error raised inside its own `with connection:` block keeps nothing that block
    wrote, as a savepoint would have undone it: the group is rolled back and each call runs again alone."""
    store = await SqliteStore.open(tmp_path / "klaw.db")
    chat = ChatRef("console", "alice")
    try:
        await store.messages.append(said(chat, 0))
        await store.db.run(lambda connection: connection.execute("CREATE TABLE notes (text TEXT)"))

        def caught(connection: apsw.Connection) -> str:
            connection.execute("INSERT INTO notes VALUES ('kept')")
            try:
                with connection:
                    connection.execute("INSERT INTO notes VALUES ('undone')")
                    raise ValueError("changed my mind")
            except ValueError:
                pass
            return "done"

        async with thread_held(store, HELD_SECONDS):
            before = asyncio.ensure_future(store.messages.append(said(chat, 1)))
            middle = asyncio.ensure_future(store.db.run(caught, grouped=True))
            after = asyncio.ensure_future(store.messages.append(said(chat, 2)))
            await queued(3)
        await asyncio.gather(before, after)

        assert await middle == "done"
        notes = await store.db.run(lambda connection: connection.execute("SELECT text FROM notes").fetchall())
        assert notes == [("kept",)]
        assert await contents(store, chat) == [f"message {n} from alice" for n in range(3)]
    finally:
        await store.aclose()
