"""A start reads nothing per idle chat (decision 477): counted, not timed. Each start read every chat's
newest log file and asked the store about each chat and each of its records (recovery), then ran a few
queries per chat (resuming): 40 s to start a library `Klaw` on a home of 3,000 idle chats (adversary27).
Now recovery reads the files written since the store's watermark and resuming asks the store once, so
twenty more idle chats add no log file opened and no statement; a line logged and never stored is still
recovered, and a run that left one (its store refused it) keeps the watermark where it was."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from klaw import FunctionModel, Klaw
from klaw.memory.log_recovery import RECOVERED_KEY
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.store.statement_trace import traced

CONFIG = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}
_opened: list[str] | None = None  # the log files opened while a counted start runs


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], str | Path) and str(args[0]).endswith(".jsonl"):
        _opened.append(str(args[0]))


sys.addaudithook(_audit)  # audit hooks stay for the process: this one counts only while `_opened` is a list


def agent(home: Path) -> Klaw:
    return Klaw(home, config=CONFIG, model=FunctionModel(lambda messages, info: "ok"))


async def chat_in(home: Path, names: list[str]) -> None:
    async with agent(home) as klaw:
        for name in names:
            await klaw.ask(name, f"hello from {name}")


def idle(home: Path) -> None:
    """Every log file last written an hour ago: the chats have been idle since."""
    an_hour_ago = time.time() - 3600
    for path in (home / "conversations").rglob("*.jsonl"):
        os.utime(path, (an_hour_ago, an_hour_ago))


async def counted_start(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """The statements the store ran and the log files opened while a library engine started."""
    global _opened
    statements = traced(monkeypatch)
    _opened = []
    klaw = agent(home)
    try:
        await klaw.start()
        counted = len(statements), len(_opened)
    finally:
        _opened = None
        monkeypatch.undo()
        await klaw.aclose()
    return counted


async def test_idle_chats_cost_a_start_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    await chat_in(home, ["first", "second"])
    idle(home)
    few_statements, few_files = await counted_start(home, monkeypatch)
    await chat_in(home, [f"customer-{n}" for n in range(20)])
    idle(home)
    many_statements, many_files = await counted_start(home, monkeypatch)
    assert (few_files, many_files) == (0, 0)
    assert many_statements - few_statements < 10, (few_statements, many_statements)  # was ~6 a chat


async def test_a_line_logged_after_the_watermark_is_recovered(tmp_path: Path) -> None:
    """A record in the log the store never took (kill -9 between the fsync and the commit) is stored at
    the next start, in an idle chat's old file as in a new chat's."""
    home = tmp_path / "home"
    await chat_in(home, ["old", "other"])
    idle(home)
    lost = MessageRecord(ChatRef("library", "old"), Role.USER, "logged, never stored")
    new = MessageRecord(ChatRef("library", "brand-new"), Role.USER, "a chat the store never saw")
    async with agent(home) as klaw:
        log = klaw.engine.processor.ingestion.log
        await log.append_many([lost, new])  # the log alone, as a crash between the two would leave it
    async with agent(home) as klaw:
        store = klaw.engine.store
        assert await store.messages.get(lost.id or "") is not None
        assert await store.messages.get(new.id or "") is not None


async def test_a_record_the_store_refused_keeps_the_watermark(tmp_path: Path) -> None:
    """A run whose store refused a logged record (a full disk) closes without moving the watermark, so
    the next start still reads that file and stores the record."""
    home = tmp_path / "home"
    await chat_in(home, ["kept"])
    async with agent(home) as klaw:
        ingestion = klaw.engine.processor.ingestion
        store = klaw.engine.store
        before = await store.settings.get(RECOVERED_KEY)
        refused = MessageRecord(ChatRef("library", "kept"), Role.USER, "the store said no")
        real_append = store.messages.append

        async def full(record: MessageRecord, *, embed: bool, log_first: Any) -> Any:
            log_first()  # the line is written and fsync'd on the store's thread, then the rows refused
            raise OSError("database or disk is full")

        setattr(store.messages, "append", full)  # noqa: B010 - the one call that fails
        with pytest.raises(OSError, match="disk is full"):
            await ingestion.accept(refused)
        setattr(store.messages, "append", real_append)  # noqa: B010
        assert ingestion.logged_not_stored(refused.id)
    database = await SqliteStore.open(home / "klaw.db")
    try:
        assert await database.settings.get(RECOVERED_KEY) == before
        assert await database.messages.get(refused.id or "") is None
    finally:
        await database.aclose()
    async with agent(home) as klaw:
        assert await klaw.engine.store.messages.get(refused.id or "") is not None


async def test_a_clock_stepped_back_does_not_hide_a_logged_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start while the wall clock ran an hour ahead (a Pi without a clock chip, before NTP) set the
    watermark an hour ahead; NTP then stepped the clock back, and a message logged after the step was
    refused by the store (as a kill -9 between the fsync and the commit leaves it). The next start must
    still read that file: its mtime is an hour before the watermark (decision 486)."""
    home = tmp_path / "home"
    await chat_in(home, ["stepped"])
    idle(home)
    real_time_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + 3600 * 1_000_000_000)  # an hour ahead
    klaw = agent(home)
    await klaw.start()
    try:
        monkeypatch.undo()  # NTP steps the clock back an hour
        ingestion = klaw.engine.processor.ingestion
        store = klaw.engine.store
        refused = MessageRecord(ChatRef("library", "stepped"), Role.USER, "logged after the step")
        real_append = store.messages.append

        async def full(record: MessageRecord, *, embed: bool, log_first: Any) -> Any:
            log_first()
            raise OSError("database or disk is full")

        setattr(store.messages, "append", full)  # noqa: B010 - the one call that fails
        with pytest.raises(OSError, match="disk is full"):
            await ingestion.accept(refused)
        setattr(store.messages, "append", real_append)  # noqa: B010
    finally:
        await klaw.aclose()
    async with agent(home) as klaw:
        assert await klaw.engine.store.messages.get(refused.id or "") is not None
