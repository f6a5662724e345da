"""Many chats closing exchanges at once: the exchange summarizer reads them in a few scans, not one scan
for each close (decision 304), and still sorts every one of them into its batch."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from klaw.store.records import ChatRef
from tests.memory.summary_helpers import Turns
from tests.memory.summary_rig import Rig, idle, summary_rig

GATHER_SECONDS = 0.2  # exchange_summarizer.SCAN_GATHER_SECONDS


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with summary_rig(tmp_path, {"batchExchanges": 3, "batchWaitSeconds": 600}) as made:
        yield made


async def test_a_burst_of_closed_exchanges_is_read_in_a_few_scans(rig: Rig) -> None:
    scans: list[int] = []
    scan = rig.store.summaries.scan_exchanges

    async def counted(*args: Any, **kwargs: Any) -> Any:
        scans.append(1)
        return await scan(*args, **kwargs)

    rig.store.summaries.scan_exchanges = counted  # type: ignore[method-assign]
    rig.service.start()
    await idle(rig)
    scans.clear()
    chats = [ChatRef("console", f"chat{n}") for n in range(12)]
    started = time.monotonic()
    for chat in chats:  # each close signals the summarizer, as the engine's turns do
        await Turns(rig.store, chat).turn(f"which stain for the fence of {chat.chat_id}", "an oil-based one")
        rig.service.exchanges.notify()
    elapsed = time.monotonic() - started
    await idle(rig)
    # One scan at once, then at most one per gathering interval while the closes kept coming, and the last;
    # before, one per close (12). On a machine so loaded that the 12 turns take seconds the bound loosens.
    most = 2 + int(elapsed / GATHER_SECONDS)
    assert len(scans) <= most, f"{len(scans)} scans for 12 closes in {elapsed:.2f} s"
    assert rig.summary_requests == []  # each waits for two more of its segment
    for chat in chats:
        await Turns(rig.store, chat).new_segment()  # a closed segment's exchanges wait no longer
    rig.service.notify()
    await idle(rig)
    sent = [r.body["messages"][1]["content"] for r in rig.summary_requests if "Summary so far" not in str(r.body)]
    assert sorted(text.split("fence of ")[1].split("\n")[0] for text in sent) == sorted(c.chat_id for c in chats)
