"""A full disk loses nothing and doubles nothing: the log keeps each record exactly once.

SQLite reports SQLITE_FULL for real here: `PRAGMA max_page_count` caps the database at the pages it
already has, exactly what a full disk does to it. The log's file-size failure is real too: a child
process with RLIMIT_FSIZE set gets EFBIG from the kernel in the middle of an append, which is how
a full disk tears a line.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import apsw
import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.frames import AckFrame, ErrorFrame, InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.conversation_log import ConversationLog
from klaw.store.sqlite.store import SqliteStore
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import engine_config

DEBOUNCE_S = 60.0
LONG_TEXT = "a message long enough to need pages of its own " * 400


@pytest.fixture
async def engine() -> AsyncIterator[tuple[Engine, ManualClock]]:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            clock = ManualClock()
            config = engine_config(server.base_url, processing={"debounceMs": int(DEBOUNCE_S * 1000)})
            engine = await Engine.start(home, config, clock=clock)
            try:
                yield engine, clock
            finally:
                await engine.shutdown(timeout_seconds=5)


async def cap_database(engine: Engine, pages: int | None) -> None:
    """Cap klaw.db at its current size (None: lift the cap), as a full disk would."""

    def cap(connection: apsw.Connection) -> None:
        limit = pages if pages is not None else 4_294_967_294
        if pages == 0:
            limit = int(next(iter(connection.execute("PRAGMA page_count")))[0])
        connection.execute(f"PRAGMA max_page_count = {limit}")

    assert isinstance(engine.store, SqliteStore)  # the disk is made full under SQLite itself
    await engine.store.db.run(cap)


def lines_with_id(home: KlawHome, record_id: str) -> list[str]:
    return [
        line
        for path in home.conversations.rglob("*.jsonl")
        for line in path.read_text().splitlines()
        if json.loads(line)["id"] == record_id
    ]


async def test_a_message_the_full_database_refused_is_logged_once_when_sent_again(
    engine: tuple[Engine, ManualClock],
) -> None:
    klaw, clock = engine
    gateway = await GatewayClient.connect(klaw.home.socket_path)
    try:
        await gateway.send_bytes(b'{"type":"hello","channels":["web"]}\n')
        frame = InboundFrame(id="m1", channel="web", chat_id="main", text=LONG_TEXT)
        await cap_database(klaw, 0)
        await gateway.send(frame)
        refused = await gateway.recv()
        assert isinstance(refused, ErrorFrame) and refused.code == "disk_full"  # sent again while it lasts (488)
        assert LONG_TEXT[:20] not in refused.message
        await gateway.send(frame)  # the gateway retries while the disk is still full
        assert isinstance(await gateway.recv(), ErrorFrame)
        await cap_database(klaw, None)  # space is back
        await gateway.send(frame)
        assert await gateway.recv() == AckFrame(id="m1")
        assert len(lines_with_id(klaw.home, "m1")) == 1
        stored = await klaw.store.messages.get("m1")
        assert stored is not None and stored.record.content == LONG_TEXT
        await clock.advance(DEBOUNCE_S)
        note = await gateway.recv()  # the text is over this model's budget: said first (decision 285)
        assert isinstance(note, OutboundFrame) and note.kind == "notice" and "over the" in note.text
        reply = await gateway.recv()
        assert isinstance(reply, OutboundFrame) and reply.reply_to == "m1"
    finally:
        await gateway.aclose()


APPEND_UNDER_A_SIZE_LIMIT = textwrap.dedent(
    """
    import asyncio, errno, resource, sys
    from klaw.memory.conversation_log import ConversationLog
    from klaw.store.records import ChatRef, MessageRecord, Role

    log = ConversationLog(__import__("pathlib").Path(sys.argv[1]))
    chat = ChatRef("console", "me")
    asyncio.run(log.append(MessageRecord(chat, Role.USER, "first", id="r1")))
    path = log.files(log.chat_dir(chat))[0]
    size = path.stat().st_size
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, hard))  # the next line gets 40 bytes in
    try:
        asyncio.run(log.append(MessageRecord(chat, Role.USER, "second " * 50, id="r2")))
    except OSError as exc:
        assert exc.errno == errno.EFBIG, exc
    else:
        raise SystemExit("the append under the limit did not fail")
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # the disk has room again
    asyncio.run(log.append(MessageRecord(chat, Role.USER, "second " * 50, id="r2")))
    """
)


def test_an_append_cut_short_by_a_full_disk_leaves_no_torn_line(tmp_path: Path) -> None:
    conversations = tmp_path / "conversations"
    result = subprocess.run(
        [sys.executable, "-c", APPEND_UNDER_A_SIZE_LIMIT, str(conversations)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    log = ConversationLog(conversations)
    report = asyncio.run(log.read(log.files(log.chat_dirs()[0])))
    assert report.skipped == []
    assert [record.id for record in report.records] == ["r1", "r2"]
