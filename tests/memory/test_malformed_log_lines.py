"""A log line nested too deep, or holding a `\\ud800` escape, is skipped and reported by every reader.

Such lines are valid enough for `json.loads` to either blow the stack (RecursionError, which is not
a ValueError) or hand back a string no later step can encode. Every reader of the log — the engine's
start-up recovery, `klaw reindex`, `klaw log check`, a task's history, the gateway's buffer — must skip
them with file:line and a reason, never their content, and go on with the lines around them.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from klaw.engine.frames import InboundFrame, encode_frame
from klaw.engine.runtime import Engine
from klaw.gateway.buffer import InboundBuffer
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.log_replay import read_day, scan_log
from klaw.memory.subagent_history import SubagentHistoryLoader
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.engine.harness import engine_config

DEEP = b'{"id":"deep","content":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
SURROGATE = (
    b'{"id":"sur","channel":"console","chat_id":"me","role":"user","type":"text",'
    b'"content":"PRIVATE \\ud800 text","created_at":"2026-03-01T11:00:00.000Z"}\n'
)
META_DEEP = (
    b'{"id":"meta","channel":"console","chat_id":"me","role":"user","type":"text","content":"PRIVATE",'
    b'"created_at":"2026-03-01T11:01:00.000Z","metadata":{"a":' + b"[" * 200 + b"]" * 200 + b"}}\n"
)
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def spoil(log_file: Path) -> None:
    """Put the three bad lines in the middle of a log file (good records before and after)."""
    lines = log_file.read_bytes().splitlines(keepends=True)
    log_file.write_bytes(b"".join(lines[:3]) + DEEP + SURROGATE + META_DEEP + b"".join(lines[3:]))


def test_log_check_reports_each_bad_line_and_stops_on_none(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    log_file = next((home / "conversations").glob("*/*.jsonl"))
    spoil(log_file)
    result = klaw_here(home, "log", "check")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "6 records, 3 malformed lines" in result.stdout
    for number in (4, 5, 6):
        assert f"{log_file}:{number}:" in result.stdout
    assert "PRIVATE" not in result.stdout + result.stderr


def test_reindex_rebuilds_around_the_bad_lines(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    log_file = next((home / "conversations").glob("*/*.jsonl"))
    spoil(log_file)
    result = klaw_here(home, "reindex")
    assert result.returncode == 0, result.stderr
    assert f"{log_file}:4:" in result.stdout and f"{log_file}:5:" in result.stdout
    assert "PRIVATE" not in result.stdout + result.stderr
    assert " 6 │" in klaw_here(home, "db", "info").stdout


async def test_the_engine_starts_and_recovers_the_records_around_the_bad_lines(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    chat = ChatRef("console", "me")
    log = ConversationLog(home.conversations)
    await log.append_many([MessageRecord(chat, Role.USER, f"before {i}", id=f"b{i}", created_at=T0) for i in range(3)])
    await log.append_many([MessageRecord(chat, Role.USER, f"after {i}", id=f"a{i}", created_at=T0) for i in range(3)])
    spoil(next(home.conversations.glob("*/*.jsonl")))
    async with FakeOpenAiServer() as server:
        engine = await Engine.start(home, engine_config(server.base_url), listen=False)
        try:
            recovered = {m.id for m in await engine.chats.history(chat)}
            assert {"b0", "b2", "a0", "a2"} <= recovered and "sur" not in recovered
        finally:
            await engine.shutdown(timeout_seconds=5)


async def test_the_log_replay_and_a_tasks_history_skip_the_bad_lines(tmp_path: Path) -> None:
    conversations = tmp_path / "conversations"
    task = ChatRef("scheduler", "digest")
    log = ConversationLog(conversations)
    await log.append_many(
        [
            MessageRecord(task, Role.USER, "run", created_at=T0),
            MessageRecord(task, Role.ASSISTANT, "one", created_at=T0),
            MessageRecord(task, Role.USER, "run", created_at=T0),
            MessageRecord(task, Role.ASSISTANT, "two", created_at=T0),
        ]
    )
    spoil(next(conversations.glob("*/*.jsonl")))
    runs = await SubagentHistoryLoader(conversations).load_runs("digest", 5)
    assert [[record.content for record in run] for run in runs] == [["run", "one"], ["run", "two"]]
    chat_log = ConversationLog(tmp_path / "chats")
    await chat_log.append_many([MessageRecord(ChatRef("console", "me"), Role.USER, "x", created_at=T0)] * 1)
    spoil_file = next((tmp_path / "chats").glob("*/*.jsonl"))
    spoil_file.write_bytes(spoil_file.read_bytes() + DEEP + SURROGATE)
    [day] = scan_log(chat_log)
    report = read_day(day)
    assert len(report.records) == 1 and [number for _, number, _ in report.skipped] == [2, 3]


@pytest.mark.parametrize("bad", [DEEP, b'{"ack":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"])
async def test_the_gateway_buffer_opens_and_keeps_the_frames_around_a_bad_line(tmp_path: Path, bad: bytes) -> None:
    directory = tmp_path / "gateway"
    directory.mkdir()
    first = InboundFrame(id="m1", channel="web", chat_id="main", text="one")
    second = InboundFrame(id="m2", channel="web", chat_id="main", text="two")
    surrogate = b'{"type":"inbound","id":"m3","channel":"web","chat_id":"main","text":"PRIVATE \\ud800"}\n'
    (directory / "inbound.jsonl").write_bytes(encode_frame(first) + bad + surrogate + encode_frame(second))
    buffer = await asyncio.wait_for(InboundBuffer.open(directory), 10)
    assert [frame.id for frame in buffer.pending()] == ["m1", "m2"]
