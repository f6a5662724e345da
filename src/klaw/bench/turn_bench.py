"""`klaw bench turn`: the engine's own cost per turn, with the model taken out of the picture.

A real engine (SQLite file, fsync'd log, context builder, tool registry, processor) answers through
the fake OpenAI server with zero model delay, so what remains is klaw's overhead plus one loopback
HTTP round trip, which is measured separately and reported beside it. The bench chat is first
filled with `stored` messages (the window and counts then run against a large table), and a second
phase measures throughput with many chats talking at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
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
from klaw.llm.messages import ChatMessage
from klaw.store.records import ChatRef, MessageRecord, Role

BENCH_CHANNEL = "bench"
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class TurnBenchResult:
    stored_messages: int
    turn: Latency  # submit → reply delivered, zero-delay model
    context_build: Latency
    fake_llm_round_trip: Latency  # one loopback HTTP call to the fake server, for subtraction
    concurrent_chats: int
    concurrent_turns: int
    turns_per_second: float


async def measure_turns(
    root: Path,
    *,
    stored: int,
    turns: int = 200,
    concurrent_chats: int = 50,
    turns_per_chat: int = 4,
    progress: Progress | None = None,
) -> TurnBenchResult:
    home = KlawHome(root)
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        config = EngineConfig.model_validate(
            {
                "models": {"fake/bench": {"baseUrl": server.base_url, "contextBudget": 8192, "maxRetries": 0}},
                "routing": {"default": "fake/bench"},
                "processing": {"debounceMs": 0},
                "embedder": {"backend": "fake"},
            }
        )
        engine = await Engine.start(home, config, listen=False)
        replies = _ReplyWaiter()
        engine.delivery.register(BENCH_CHANNEL, replies.deliver)
        try:
            chat = ChatRef(BENCH_CHANNEL, "main")
            await _fill(engine, chat, stored, progress)
            turn_times = []
            for i in range(turns):
                start = time.perf_counter()
                await replies.turn(engine, chat, f"turn {i}: what did we say about the garden last week?")
                turn_times.append(time.perf_counter() - start)
                if progress:
                    progress("turns", i + 1, turns)
            build_times = await _context_builds(engine, chat, turns)
            round_trips = await _round_trips(engine, turns)
            start = time.perf_counter()
            await asyncio.gather(
                *(
                    _chat_turns(engine, replies, ChatRef(BENCH_CHANNEL, f"c{n}"), turns_per_chat)
                    for n in range(concurrent_chats)
                )
            )
            elapsed = time.perf_counter() - start
        finally:
            await engine.shutdown(timeout_seconds=10)
    total = concurrent_chats * turns_per_chat
    return TurnBenchResult(
        stored_messages=stored,
        turn=Latency.of(turn_times),
        context_build=Latency.of(build_times),
        fake_llm_round_trip=Latency.of(round_trips),
        concurrent_chats=concurrent_chats,
        concurrent_turns=total,
        turns_per_second=total / elapsed,
    )


class _ReplyWaiter:
    def __init__(self) -> None:
        self._waiting: dict[str | None, asyncio.Future[Outbound]] = {}

    async def deliver(self, outbound: Outbound) -> None:
        future = self._waiting.pop(outbound.reply_to, None)
        if future is not None and not future.done():
            future.set_result(outbound)

    async def turn(self, engine: Engine, chat: ChatRef, text: str) -> Outbound:
        submitted = await engine.submit(chat, text)
        future = self._waiting.setdefault(submitted.message_id, asyncio.get_running_loop().create_future())
        return await asyncio.wait_for(future, timeout=60)


async def _chat_turns(engine: Engine, replies: _ReplyWaiter, chat: ChatRef, count: int) -> None:
    for i in range(count):
        await replies.turn(engine, chat, f"message {i} from {chat.chat_id}")


async def _fill(engine: Engine, chat: ChatRef, stored: int, progress: Progress | None) -> None:
    start = datetime.now(UTC) - timedelta(days=30)
    batch = 5000
    for first in range(0, stored, batch):
        records = [
            MessageRecord(
                chat=chat,
                role=Role.USER if (first + i) % 2 == 0 else Role.ASSISTANT,
                content=f"stored message {first + i} about the garden, dinner plans and a trip to Lisbon",
                created_at=start + timedelta(seconds=first + i),
            )
            for i in range(min(batch, stored - first))
        ]
        await engine.store.messages.append_many(records)
        if progress:
            progress("fill", first + len(records), stored)


async def _context_builds(engine: Engine, chat: ChatRef, count: int) -> list[float]:
    session = await engine.sessions.get_or_create(chat)
    window = await engine.store.messages.window(session.segment.id, 1)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        await engine.processor.context_builder.build(session, window)
        times.append(time.perf_counter() - start)
    return times


async def _round_trips(engine: Engine, count: int) -> list[float]:
    model = engine.router.default
    times = []
    for i in range(count):
        start = time.perf_counter()
        await model.complete([ChatMessage.user(f"ping {i}")])
        times.append(time.perf_counter() - start)
    return times
