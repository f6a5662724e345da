"""A FIFO planted in the workspace cannot wedge the engine: the file tools refuse anything but regular files.

Opening a FIFO blocks its thread until the other end opens. Eight `file_read`s of FIFOs used to hold
every thread of the default pool, which the log's appends shared, so no chat's message could be
stored (nor acknowledged) any more. Both halves are checked: the tools answer at once, and the log
appends on threads of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from klaw.llm.fake_server import TextReply, ToolCallsReply
from klaw.memory.conversation_log import ConversationLog
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.tools.builtin.workspace_files import file_read, file_write
from klaw.tools.calls import ToolRefusal
from klaw.tools.schema import ToolContext
from tests.engine.harness import running_engine

PIPES = 8


@contextlib.contextmanager
def fifos(directory: Path, count: int) -> Iterator[list[Path]]:
    """FIFOs in `directory`; afterwards any reader or writer still blocked on one is released
    (so that, on code that opens them, the test fails instead of hanging the interpreter's exit)."""
    paths = [directory / f"pipe{n}" for n in range(count)]
    for path in paths:
        os.mkfifo(path)
    try:
        yield paths
    finally:
        for path in paths:
            for flags in (os.O_WRONLY, os.O_RDONLY):
                with contextlib.suppress(OSError):
                    os.close(os.open(path, flags | os.O_NONBLOCK))


async def test_eight_reads_of_fifos_are_refused_and_every_chat_is_still_answered(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        with fifos(h.home.workspace, PIPES) as pipes:
            calls = tuple((f"call{n}", "file_read", json.dumps({"path": pipe.name})) for n, pipe in enumerate(pipes))
            h.server.reply(ToolCallsReply(calls))
            h.server.reply(TextReply("those are pipes"))
            reply = await h.turn("read the pipes in my workspace")
            other = await h.turn("and hello from elsewhere", ChatRef("web", "other"))
        assert reply.text == "those are pipes"
        assert other.text.startswith("echo: ")
        results = [m for m in h.server.chat_requests[1].body["messages"] if m.get("role") == "tool"]
        assert len(results) == PIPES
        assert all("is not a regular file" in result["content"] for result in results)


async def test_writing_to_a_fifo_with_no_reader_is_refused_at_once(tmp_path: Path) -> None:
    with fifos(tmp_path, 1) as [pipe]:
        context = ToolContext(chat=ChatRef("console", "me"), workspace=tmp_path)
        for call in (file_write(context, pipe.name, "x"), file_write(context, pipe.name, "x", append=True)):
            with pytest.raises(ToolRefusal, match="is not a regular file"):
                await asyncio.wait_for(call, 5)
        with pytest.raises(ToolRefusal, match="is not a regular file"):
            await asyncio.wait_for(file_read(context, pipe.name), 5)


async def test_log_appends_go_on_while_the_default_thread_pool_is_busy(tmp_path: Path) -> None:
    release = asyncio.Event()
    loop = asyncio.get_running_loop()
    blocker = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(blocker)  # one thread, held until the append is done
    held = loop.run_in_executor(None, lambda: asyncio.run_coroutine_threadsafe(release.wait(), loop).result())
    try:
        log = ConversationLog(tmp_path / "conversations")
        record = MessageRecord(ChatRef("console", "me"), Role.USER, "hi")
        await asyncio.wait_for(log.append(record), 5)
        assert len((await asyncio.wait_for(log.read(log.files(log.chat_dir(record.chat))), 5)).records) == 1
    finally:
        release.set()
        await held
        blocker.shutdown()
