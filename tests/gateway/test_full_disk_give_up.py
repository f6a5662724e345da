"""A message the engine could not finish taking (its disk full) is not called "dropped" when it was kept.

The engine logs a message before the store takes it. With the database full (SQLite's real
SQLITE_FULL, via `PRAGMA max_page_count`, as in tests/engine/test_full_disk.py) the log line is
written and the store refuses; the gateway retries the same id and at last gives up. The person was
told "was dropped; please send it again" and sent it again: stored twice. Now the words say only
what the gateway knows (decision 400).
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


async def test_a_message_given_up_on_a_full_disk_is_not_called_dropped() -> None:
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
                async with asyncio.timeout(WAIT):  # each retry waits on the gateway's clock
                    while not any(frame.kind == "error" for frame in channel.frames):
                        await clock.advance(60)
                        await asyncio.sleep(0.02)
                error = await channel.frame_for("alice", "error")
                assert error.reply_to == "m1"
                assert len(lines_with_id(home, "m1")) == 1  # the engine kept it: its log holds it
                assert "dropped" not in error.text and "please send it again" not in error.text
                assert "may" in error.text and "look at the chat" in error.text and "disk is full" in error.text
                assert LONG_TEXT[:20] not in error.text
            finally:
                await gateway.stop()
                await engine.shutdown(timeout_seconds=5)
