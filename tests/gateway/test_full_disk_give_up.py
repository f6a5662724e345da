"""A message the engine could not finish taking (its disk full) is neither called "dropped" nor given up.

The engine logs a message before the store takes it. With the database full (SQLite's real
SQLITE_FULL, via `PRAGMA max_page_count`, as in tests/engine/test_full_disk.py) the log line is
written and the store refuses; the gateway retries the same id and at last gives up. The person was
told "was dropped; please send it again" and sent it again: stored twice. Now the words say only
what the gateway knows (decision 400); and since decision 488 a full disk is not given up at all.
"""

from __future__ import annotations

import asyncio

from klaw.engine.clock import ManualClock
from klaw.engine.runtime import Engine
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.engine.harness import engine_config
from tests.engine.test_full_disk import LONG_TEXT, cap_database, lines_with_id
from tests.gateway.test_poison_messages import WAIT, WebLikeChannel


async def test_a_message_a_full_disk_refuses_is_never_given_up_and_is_stored_once_there_is_room() -> None:
    """Decision 488 (adversary28): the gateway gave up after 8 refusals, the log held the message, the chat
    did not show it, and it was answered only after a restart. Now it waits in the gateway for as long as
    the disk is full, the person told once, in words that name the disk, and it is stored once."""
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            engine = await Engine.start(home, engine_config(server.base_url, processing={"debounceMs": 60_000}))
            channel = WebLikeChannel()
            clock = ManualClock()
            gateway = Gateway(home, [channel], clock=clock)
            try:
                await gateway.start()
                async with asyncio.timeout(WAIT):
                    await gateway.link.connected.wait()
                await cap_database(engine, 0)  # the disk is full for the store
                await gateway.submit("web", "alice", LONG_TEXT, message_id="m1")
                told = await channel.frame_for("alice", "notice")
                for _ in range(12):  # more refusals than a passing fault gets (MAX_ATTEMPTS)
                    await clock.advance(60)
                    await asyncio.sleep(0.05)
                assert told.reply_to == "m1" and "no space left" in told.text and "kept" in told.text
                assert [f.kind for f in channel.frames] == ["notice"]  # told once, and nothing given up
                assert LONG_TEXT[:20] not in told.text
                await cap_database(engine, None)  # space is back
                async with asyncio.timeout(WAIT):
                    while await engine.store.messages.get("m1") is None:
                        await clock.advance(60)
                        await asyncio.sleep(0.05)
                assert len(lines_with_id(home, "m1")) == 1  # logged once, though refused many times
            finally:
                await gateway.stop()
                await engine.shutdown(timeout_seconds=5)
