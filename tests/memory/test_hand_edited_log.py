"""A hand-edited log: a person's message of 200,000 characters, a record dated 9999-12-31 and one id on two
lines. adversary28: `klaw log check` flagged none of them, start-up recovered the long one and its resumed turn
built 2.5 million tokens for a 7,372-token model. Now log check names each (exit 1) and recovery leaves the
over-long message out, as a channel would have refused it (decision 488)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from klaw.message_text import MAX_MESSAGE_CHARS
from klaw.store.log_format import encode_record
from klaw.store.records import MessageRecord, Role
from tests.cli.klaw_here import klaw_here
from tests.engine.harness import CHAT, running_engine


async def test_log_check_names_hand_edited_records_and_recovery_leaves_an_over_long_message_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_engine(tmp_path) as h:
        assert (await h.turn("good morning")).kind == "reply"
    day = sorted((h.home.conversations / CHAT.log_dir_name).glob("*.jsonl"))[-1]
    first = day.read_text().splitlines()[0]
    huge = MessageRecord(CHAT, Role.USER, "x" * (2 * MAX_MESSAGE_CHARS), id="huge1")
    future = MessageRecord(
        CHAT, Role.USER, "hello from later", id="future1", created_at=datetime(9999, 12, 31, tzinfo=UTC)
    )
    with day.open("a") as log:
        log.write("\n".join([encode_record(huge), encode_record(future), first]) + "\n")

    checked = await asyncio.to_thread(klaw_here, h.home.root, "log", "check")

    assert checked.returncode != 0
    said = " ".join(checked.stdout.split())
    assert f"record huge1: a person's message of {2 * MAX_MESSAGE_CHARS:,} characters" in said
    assert "record future1: dated 9999-12-31, in the future" in said
    assert "its id is on 2 lines" in said and "3 odd record(s)" in said
    assert "xxxxxxxxxx" not in checked.stdout + checked.stderr  # ids and sizes, never text

    caplog.set_level(logging.WARNING, logger="klaw.memory.ingestion")
    async with running_engine(tmp_path) as again:
        assert await again.engine.store.messages.get("huge1") is None
        assert await again.engine.store.messages.get("future1") is not None  # named, not refused
    assert any("not recovered: record huge1" in r.getMessage() for r in caplog.records)
