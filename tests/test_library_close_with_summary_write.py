"""Closing while a summary is being written: the write lands before the store closes. The summarizers'
accepts are shielded from cancellation, so one outlives its stopped summarizer; before, shutdown waited
for the records under way only after cancelled turns, and such a write reached a closed store ("Task
exception was never retrieved … apsw.ConnectionClosedError" at `klaw chat`'s exit, the summary lost).
Here the write is held until shutdown waits for it (or, on the old code, until the store closes)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw
from klaw.memory.ingestion import Ingestion
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.sqlite.repository import SqliteSummaries

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"batchExchanges": 1}}  # summarized at once


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return "1. the person asked about apples" if info.purpose == "summary" else "twelve apples"


async def test_a_summary_being_written_at_close_is_stored_before_the_store_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = asyncio.Event()  # a summary write is under way, held
    closing = False
    release = asyncio.Event()
    outcome: list[str] = []
    store_closed_with_write_held: list[bool] = []
    append_record, settled, store_close = SqliteSummaries.append_record, Ingestion.settled, SqliteStore.aclose

    async def holding_append(self: SqliteSummaries, record: Any, **kwargs: Any) -> Any:
        if held.is_set():
            return await append_record(self, record, **kwargs)
        held.set()
        await release.wait()
        try:
            stored = await append_record(self, record, **kwargs)
        except Exception as exc:
            outcome.append(type(exc).__name__)
            raise
        outcome.append("stored")
        return stored

    async def settling(self: Ingestion) -> None:
        if closing:
            release.set()  # shutdown waits for the records under way: let the held write go on
        await settled(self)

    async def closing_store(self: SqliteStore) -> None:
        store_closed_with_write_held.append(not outcome)
        release.set()  # the old order: the write goes on only into a closed store
        await store_close(self)
        await asyncio.sleep(0.05)  # the write's task ends (in error, on the old code) before the check

    monkeypatch.setattr(SqliteSummaries, "append_record", holding_append)
    monkeypatch.setattr(Ingestion, "settled", settling)
    monkeypatch.setattr(SqliteStore, "aclose", closing_store)
    agent = Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model))
    await agent.start()
    assert await agent.ask("alice", "how many apples are there?") == "twelve apples"
    await asyncio.wait_for(held.wait(), 60)
    closing = True
    await agent.aclose()
    assert store_closed_with_write_held == [False]
    assert outcome == ["stored"]
