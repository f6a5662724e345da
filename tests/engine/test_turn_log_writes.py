"""How many times a turn waits for the disk: the conversation log is fsync'd once for the person's
message (before it is acknowledged), once for the exchange's opening, and once for the reply together
with the exchange's close (both durable before the reply is delivered). Each fsync is a few
milliseconds of a turn on a real disk, and all of them queue on the same disk when many chats talk.

fsync is counted where it reaches the operating system (`os.fsync`, per file), the engine running
whole: real SQLite, real log files, the fake OpenAI server over HTTP.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from klaw.memory.conversation_log import ConversationLog
from klaw.store.records import MessageType
from tests.engine.harness import CHAT, running_engine


async def test_a_turn_fsyncs_the_log_three_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: Counter[str] = Counter()
    lock = threading.Lock()
    fsync = os.fsync

    def counting(fd: int) -> None:
        fsync(fd)
        target = os.readlink(f"/proc/self/fd/{fd}")
        if target.endswith(".jsonl"):
            with lock:
                synced[target] += 1

    async with running_engine(tmp_path) as h:
        await h.turn("hello")  # the chat's log file and folder exist from here on
        monkeypatch.setattr(os, "fsync", counting)
        reply = await h.turn("how are you?")
        monkeypatch.setattr(os, "fsync", fsync)
        assert reply.text == "echo: how are you?"
        [(path, count)] = synced.items()
        assert Path(path).parent.name == CHAT.log_dir_name
        assert count == 3, synced
        report = await ConversationLog(Path(path).parent.parent).read([Path(path)])
        assert [(r.type, r.role.value) for r in report.records[-4:]] == [
            (MessageType.TEXT, "user"),
            (MessageType.EXCHANGE_OPEN, "system"),
            (MessageType.TEXT, "assistant"),
            (MessageType.EXCHANGE_CLOSE, "system"),
        ]
