"""A hand-edited log: a person's message of 200,000 characters, a record dated 9999-12-31 and one id on two
lines. adversary28: `klaw log check` flagged none of them, start-up recovered the long one and its resumed turn
built 2.5 million tokens for a 7,372-token model. Now log check names each (exit 1) and recovery leaves the
over-long message out, as a channel would have refused it (decision 488)."""

from __future__ import annotations

import asyncio
import json
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


async def test_log_check_names_exchange_lines_a_person_moved(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """adversary29 (decision 503): a person swapped the user and assistant lines of one exchange and moved another
    exchange's close above its open. `klaw log check` said "0 malformed lines", exit 0; `klaw reindex` then warned
    "exchange_close record … found no open exchange; ignored" and left an exchange open with no text. Now log
    check names each line out of place (ids, never text) and exits 1; reindex's warnings stay."""
    async with running_engine(tmp_path) as h:
        assert (await h.turn("first question")).kind == "reply"
        assert (await h.turn("second question")).kind == "reply"
    day = sorted((h.home.conversations / CHAT.log_dir_name).glob("*.jsonl"))[-1]
    lines = day.read_text().splitlines()
    kinds = [json.loads(line).get("type", "text") for line in lines]
    ids = [json.loads(line)["id"] for line in lines]
    opens = [i for i, kind in enumerate(kinds) if kind == "exchange_open"]
    closes = [i for i, kind in enumerate(kinds) if kind == "exchange_close"]
    assert len(opens) == len(closes) == 2 and opens[0] > 0, kinds
    asked, reply = (
        opens[0] - 1,
        next(i for i in range(opens[0], closes[0]) if json.loads(lines[i])["role"] == "assistant"),
    )
    lines[asked], lines[reply] = lines[reply], lines[asked]  # the person's message and the reply, swapped
    lines.insert(opens[1], lines.pop(closes[1]))  # the second exchange's close above its open
    day.write_text("\n".join(lines) + "\n")

    checked = await asyncio.to_thread(klaw_here, h.home.root, "log", "check")

    assert checked.returncode == 1, checked.stdout
    said = " ".join(checked.stdout.split())
    assert f"record {ids[opens[0]]}: an exchange_open before the person's message {ids[asked]} it opens on" in said
    assert f"record {ids[reply]}: an exchange's reply before its exchange_open {ids[opens[0]]}" in said
    assert f"record {ids[closes[1]]}: an exchange_close before its exchange_open {ids[opens[1]]}" in said
    assert "3 odd record(s)" in said and "question" not in said

    reindexed = await asyncio.to_thread(klaw_here, h.home.root, "reindex")
    assert "found no open exchange; ignored" in reindexed.stdout + reindexed.stderr
