"""A log record whose channel and chat_id name another chat than its folder is a malformed line.

`conversations/<channel>_<chat_id>/` holds that chat's records only; a record naming another chat
(a file moved or edited by hand) was, before, counted as fine by `klaw log check` and replayed by the
engine's start-up into that other chat, creating it (`conversations/<channel>_ZZ/`). Every reader now
reports it as a malformed line (file:line and what is wrong, never its content) and skips it.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.log_format import encode_record
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import CHAT, T0, a_home
from tests.engine.harness import engine_config

STRAY = ChatRef(CHAT.channel, "ZZ")
REASON = "its channel and chat_id are another chat's than its folder's"


def a_home_with_a_stray_record(tmp_path: Path) -> tuple[Path, Path]:
    """The home's one chat (6 records) with a 7th, valid, line naming the chat ZZ appended to its file."""
    home = a_home(tmp_path)
    log_file = next((home / "conversations").glob("*/*.jsonl"))
    stray = MessageRecord(STRAY, Role.USER, "PRIVATE stray words", id="stray", created_at=T0)
    with open(log_file, "a", encoding="utf-8") as handle:
        handle.write(encode_record(stray) + "\n")
    return home, log_file


def test_log_check_names_the_stray_line(tmp_path: Path) -> None:
    home, log_file = a_home_with_a_stray_record(tmp_path)
    result = klaw_here(home, "log", "check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "6 records, 1 malformed lines" in result.stdout
    assert f"{log_file}:7: {REASON}" in result.stdout
    assert "PRIVATE" not in result.stdout + result.stderr


def test_reindex_reports_and_skips_the_stray_line(tmp_path: Path) -> None:
    home, log_file = a_home_with_a_stray_record(tmp_path)
    result = klaw_here(home, "reindex")
    assert result.returncode == 0, result.stderr
    assert f"{log_file}:7: {REASON}" in result.stdout, result.stdout
    assert "PRIVATE" not in result.stdout + result.stderr
    assert " 6 │" in klaw_here(home, "db", "info").stdout


async def test_the_engine_start_replays_no_stray_record_into_another_chat(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home_dir, log_file = await asyncio.to_thread(a_home_with_a_stray_record, tmp_path)  # a_home runs a loop
    home = KlawHome(home_dir)
    caplog.set_level(logging.WARNING, logger="klaw.memory.conversation_log")
    async with FakeOpenAiServer() as server:
        engine = await Engine.start(home, engine_config(server.base_url), listen=False)
        try:
            assert await engine.chats.history(STRAY) == []
            assert len(await engine.chats.history(CHAT)) == 6
        finally:
            await engine.shutdown(timeout_seconds=5)
    assert not (home.conversations / STRAY.log_dir_name).exists()
    warnings = [r.getMessage() for r in caplog.records if "skipping malformed log line" in r.getMessage()]
    assert len(warnings) == 1 and f"{log_file}:7 ({REASON}" in warnings[0]  # before, twice (newest file read twice)
    assert "PRIVATE" not in caplog.text
