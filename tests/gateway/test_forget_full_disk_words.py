"""`/forget` sent through a gateway while the disk is full: the engine refuses the command as a passing
fault, the gateway retries it and at last gives up with the engine's words. They said "could not finish
taking this command (the disk is full; free some space); it may already be kept": no disk named, and
"kept" read as if about the chat. Now they name the disk, say nothing was lost and that the command may
not have taken effect (decision 486). The tombstone's write fails with ENOSPC (a capped klaw.db still
had room for it in its free pages)."""

from __future__ import annotations

import asyncio
import errno
from typing import Any

import pytest

from klaw.disk_trouble import mount_point
from klaw.engine.clock import ManualClock
from klaw.engine.runtime import Engine
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.ingestion import Ingestion
from klaw.store.records import MessageType
from tests.engine import short_socket_dir
from tests.engine.harness import engine_config
from tests.gateway.test_poison_messages import WAIT, WebLikeChannel


async def test_a_forget_given_up_on_a_full_disk_names_the_disk_and_says_nothing_was_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    append = Ingestion._append

    async def full(self: Ingestion, records: Any, embed: Any, write: Any) -> Any:
        if records[0].type is MessageType.FORGET:
            raise OSError(errno.ENOSPC, "No space left on device")
        return await append(self, records, embed, write)

    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            server.reply_text("Noted.")
            engine = await Engine.start(home, engine_config(server.base_url, processing={"debounceMs": 0}))
            channel = WebLikeChannel()
            clock = ManualClock()
            gateway = Gateway(home, [channel], clock=clock)
            try:
                await gateway.start()
                async with asyncio.timeout(WAIT):
                    await gateway.link.connected.wait()
                await gateway.submit("web", "alice", "my locker code is 1234", message_id="m1")
                await channel.frame_for("alice", "reply")
                monkeypatch.setattr(Ingestion, "_append", full)  # the disk is full now
                await gateway.submit("web", "alice", "/forget last", message_id="c1")
                async with asyncio.timeout(WAIT):  # each retry waits on the gateway's clock
                    while not any(frame.kind == "error" for frame in channel.frames):
                        await clock.advance(60)
                        await asyncio.sleep(0.02)
                error = await channel.frame_for("alice", "error")
                said = " ".join(error.text.split())
                assert error.reply_to == "c1"
                assert said == (
                    "Sorry, the engine could not carry out this command (the disk is full: no space left on"
                    f" {mount_point(home.root)}, which holds klaw's home; free some space); nothing was lost, and"
                    " it may not have taken effect: look at the chat before sending it again."
                ), said
            finally:
                await gateway.stop()
                await engine.shutdown(timeout_seconds=5)
