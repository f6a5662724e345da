"""`/forget` on a full disk, asked through the library as a person's program asks: the words named the disk
but said "I could not take this message … so it was not saved … send it again", as if the conversation
were lost. A command is now said as one: what it could not do, the disk, that nothing was lost, and to
send it again once there is space (decision 486)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from klaw import FunctionModel, Klaw, TurnFailed
from klaw.disk_trouble import mount_point
from klaw.memory.ingestion import Ingestion
from klaw.store.records import MessageType

CONFIG = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}


@pytest.mark.parametrize("logged", [False, True], ids=["log-full", "database-full-after-the-log"])
async def test_a_forget_a_full_disk_stopped_says_so_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logged: bool
) -> None:
    home = tmp_path / "home"
    async with Klaw(home, config=CONFIG, model=FunctionModel(lambda messages, info: "noted")) as klaw:
        await klaw.ask("me", "my locker code is 1234")
        append = Ingestion._append

        async def full(self: Ingestion, records: Any, embed: Any, write: Any) -> Any:
            if records[0].type is MessageType.FORGET:
                if logged:
                    write()  # the tombstone's line is durable, then the database's write fails
                raise OSError(errno.ENOSPC, "No space left on device")
            return await append(self, records, embed, write)

        monkeypatch.setattr(Ingestion, "_append", full)
        with pytest.raises(TurnFailed) as failed:
            await klaw.ask("me", "/forget last")
        monkeypatch.setattr(Ingestion, "_append", append)
        said = str(failed.value)
        assert said == (
            f"Sorry, I could not carry out /forget: the disk is full (no space left on {mount_point(home)}, which"
            " holds klaw's home). Nothing was lost, and /forget may not have taken effect. Free some space there"
            " (df -h shows how much is left), then send /forget again."
        )
        assert [message.text for message in await klaw.history("me")][:2] == ["my locker code is 1234", "noted"]
        assert "Forgot" in await klaw.ask("me", "/forget last")  # space again: the same command works
