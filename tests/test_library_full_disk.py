"""A message a full disk keeps out of the conversation log: `ask` raises `TurnFailed` in the words a failed
turn uses for a full disk (what is full, what to do), with the OSError as its cause, and after space is
freed the next message is answered. Before, the log's `OSError: [Errno 28] No space left on device` came out
of `ask` bare, and `/status` raised scheduler.db's error (adversary14). A real tmpfs holds the home (root
only), filled by a file of zeros."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from klaw import FunctionModel, Klaw, ManualClock, TurnFailed
from tests.own_disk import fill, tmpfs
from tests.test_library import CONFIG


async def test_a_message_the_full_disk_cannot_log_is_refused_in_words_and_the_next_is_answered(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", "40m") as disk:
        model = FunctionModel(lambda messages, info: f"echo: {(messages[-1].content or '')[:20]}")
        async with Klaw(disk / "home", config=CONFIG, model=model, clock=ManualClock()) as agent:
            assert await agent.ask("ana", "hello") == "echo: hello"
            filler = fill(disk)
            with pytest.raises(TurnFailed) as refused:
                await agent.ask("ana", "remember the blue kettle " * 400)
            said = str(refused.value)
            assert said.startswith("Sorry, I could not take this message: the disk is full (no space left on ")
            assert str(disk) in said and "Free some space there" in said and "send it again" in said
            assert isinstance(refused.value.cause, OSError) and refused.value.cause.errno == errno.ENOSPC
            # /status still answers, saying what it cannot read (it raised scheduler.db's error: adversary14)
            status = await agent.ask("ana", "/status")
            assert "Uptime:" in status and "Embedding queue:" in status, status
            scheduled = next(line for line in status.splitlines() if line.startswith("Scheduled tasks:"))
            assert scheduled.startswith("Scheduled tasks: ") and "Error" not in scheduled, scheduled
            filler.unlink()  # the person frees space
            assert await agent.ask("ana", "hello again") == "echo: hello again"
