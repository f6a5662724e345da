"""`klaw bench send`: what one `message_send` costs the engine, call to result, on this machine.

A whole engine (library API, no socket) on a fresh home's klaw.db, a Telegram channel in process
(its sink takes the message and returns), the fake model server only for the start. Each call is the
tool as a turn makes it, through the engine's registry: the caps (the hour's place in the store since
decision 418), the record in the target chat's log and store, the delivery. Every call has a turn of
its own (a fresh context: the turn's cap never bites) and its clock six minutes after the previous
one, so the target chat holds the last hour's ten sends, as with the default cap of ten an hour and a
steady sender; the hour's cap is raised out of the way all the same.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from klaw.bench.stats import Latency
from klaw.config import EngineConfig
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.schema import ToolContext

SOURCE = ChatRef("console", "bench")
STEP = timedelta(minutes=6)
WARM_UP = 20


@dataclass(frozen=True)
class SendFigures:
    send: Latency


class _Steps:
    """The tools' clock: each `now` as the engine's turn would give it, one step per call."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def now(self) -> datetime:
        return self.at


async def measure_send(root: Path, runs: int) -> SendFigures:
    home = KlawHome(root / "home")
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        config = EngineConfig.model_validate(
            {
                "models": {"fake/small": {"baseUrl": server.base_url, "contextBudget": 4000, "maxRetries": 0}},
                "routing": {"default": "fake/small"},
                "embedder": {"backend": "fake", "dim": 32},
                "summarizer": {"enabled": False},
                "channels": {"telegram": {"enabled": True, "allowedChatIds": [42]}},
                "tools": {"messageSendsPerTurn": 1000, "messageSendsPerChatPerHour": 100_000},
            }
        )
        engine = await Engine.start(home, config, listen=False)
        try:
            delivered: list[str] = []

            async def telegram(outbound: Outbound) -> None:
                delivered.append(outbound.text)

            engine.delivery.register("telegram", telegram)
            clock = _Steps()
            seconds = []
            for i in range(WARM_UP + runs):
                clock.at += STEP
                context = ToolContext(SOURCE, home.workspace, {"clock": clock})
                call = ToolCall(f"call_{i}", "message_send", json.dumps({"target": "telegram:42", "text": f"note {i}"}))
                started = time.perf_counter()
                result = await engine.tools.execute(call, context)
                elapsed = time.perf_counter() - started
                if result.content != "Sent to telegram:42.":
                    raise RuntimeError(f"the benchmark's send was not sent: {result.content[:200]}")
                if i >= WARM_UP:
                    seconds.append(elapsed)
            if len(delivered) != WARM_UP + runs:
                raise RuntimeError(f"{len(delivered)} of {WARM_UP + runs} sends reached the channel")
        finally:
            await engine.shutdown(timeout_seconds=10)
    return SendFigures(Latency.of(seconds))
