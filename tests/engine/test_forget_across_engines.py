"""`/forget` with two engines on one real PostgreSQL database (decision 286): a message accepted before the
`/forget` never reaches the model after it, whichever engine its turn is in. The fake OpenAI server holds
the first engine's turn; the second engine's `/forget last` must stop its own turn that waits for the chat's
lease (it used to run once the lease came, sending the pin to the model), and a turn under way in the other
engine stops at its next model call (it used to go on, the pin in every later request)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.engine.stopped_turns import ERASED, KEPT
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.postgres.store import PostgresStore
from tests.conftest import new_database
from tests.engine.harness import CHAT, engine_config
from tests.pg_server import PgServer
from tests.store.raw import value

VARIABLE = "KLAW_TEST_DATABASE_URL"
SECRET = "PIN-ACROSS-ENGINES-5512"
TIMEOUT_S = 30.0


@dataclass
class _Side:
    """One engine of the two, what it delivered to the person, and its own manual clock (debounce)."""

    engine: Engine
    clock: ManualClock
    delivered: list[Outbound] = field(default_factory=list)

    async def record(self, outbound: Outbound) -> None:
        self.delivered.append(outbound)

    async def say(self, text: str) -> None:
        await self.engine.submit(CHAT, text)
        await self.clock.advance(self.engine.config.processing.debounce_ms / 1000)

    async def command(self, text: str) -> str:
        reply = (await self.engine.submit(CHAT, text)).command_reply
        assert reply is not None
        return reply


@contextlib.asynccontextmanager
async def _two_engines(tmp_path: Path, server: FakeOpenAiServer) -> AsyncIterator[tuple[_Side, _Side]]:
    """Two engines, each its own home, on the database `VARIABLE` names (the test set it)."""
    async with contextlib.AsyncExitStack() as stack:
        sides = []
        for name in "ab":
            home = KlawHome(tmp_path / name)
            initialise_home(home)
            config = engine_config(server.base_url, database={"backend": "postgres", "urlEnv": VARIABLE})
            clock = ManualClock()
            engine = await Engine.start(home, config, clock=clock, listen=False)
            stack.push_async_callback(engine.shutdown, timeout_seconds=5)
            side = _Side(engine, clock)
            engine.delivery.register(CHAT.channel, side.record)
            sides.append(side)
        yield sides[0], sides[1]


async def _until(check: Callable[[], bool], what: str) -> None:
    """Poll: the other engine's turn ends on its own (nothing here can signal it)."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT_S
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"not within {TIMEOUT_S} s: {what}"
        await asyncio.sleep(0.02)


def _holding() -> tuple[asyncio.Event, asyncio.Event, Callable[[], Awaitable[None]]]:
    asked, released = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        asked.set()
        await released.wait()

    return asked, released, hold


async def _secret_left(engine: Engine) -> int:
    """Rows of the shared database still holding the pin (messages, saved memories, the log)."""
    store = engine.store
    assert isinstance(store, PostgresStore)
    pattern = f"%{SECRET}%"
    return int(
        await value(
            store,
            "SELECT (SELECT count(*) FROM messages WHERE content LIKE ? OR context LIKE ? OR metadata LIKE ?)"
            " + (SELECT count(*) FROM memory_chunks WHERE content LIKE ?)"
            " + (SELECT count(*) FROM log_records WHERE line LIKE ?)",
            *[pattern] * 5,
        )
    )


async def test_forget_last_stops_this_engines_turn_waiting_for_the_lease_another_engine_holds(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """b's turn holds the chat's lease (held by the model); a's turn for the pin holds a's turn lock and waits
    for the lease. a's `/forget last` used to wait for that turn, which ran once b let the lease go."""
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    asked, released, hold = _holding()
    async with FakeOpenAiServer() as server, _two_engines(tmp_path, server) as (a, b):
        server.reply_text("a slow answer", before=hold)
        await b.say("a slow question")
        await asyncio.wait_for(asked.wait(), TIMEOUT_S)  # b holds the lease, its turn in the model
        await a.say(f"and my pin is {SECRET}")
        processor = a.engine.processor
        await _until(lambda: processor.turns_under_way == 1 and processor.waiting_chats == 0, "a's turn waits")

        forget = asyncio.create_task(a.command("/forget last"))
        await asyncio.wait([forget], timeout=5)  # the old code waited here for b's turn, then ran a's
        released.set()
        answer = await asyncio.wait_for(forget, TIMEOUT_S)

        assert all(SECRET not in json.dumps(r.body) for r in server.chat_requests)  # the model never saw it
        assert answer.startswith("Stopped the turn under way in this chat, then forgot exchange"), answer
        assert [(o.kind, o.text) for o in a.delivered] == [("error", ERASED)]
        # b's turn, held before the forget, stops at its answer: something in its chat was forgotten
        await _until(lambda: bool(b.delivered), "b's turn ends")
        assert [(o.kind, o.text) for o in b.delivered] == [("error", KEPT)]
        await b.say("anything else?")
        await _until(lambda: len(b.delivered) == 2, "b answers the next message")
        assert b.delivered[-1].text == "echo: anything else?"
        assert SECRET not in json.dumps(server.chat_requests[-1].body)
        assert await _secret_left(a.engine) == 0


async def test_a_turn_under_way_on_another_engine_stops_before_its_next_model_call(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """b's turn for the pin is in the model when a's `/forget last` erases its exchange; the model then asks
    for memory_save. The old code recorded the call (the pin in it), saved it and asked the model again with
    the pin; now b stops before recording anything more and tells the person the message was erased."""
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    asked, released, hold = _holding()
    async with FakeOpenAiServer() as server, _two_engines(tmp_path, server) as (a, b):
        await b.say("the weather is nice today")
        await _until(lambda: len(b.delivered) == 1, "b answers the first message")
        server.reply_tool_calls([("memory_save", {"text": f"pin {SECRET}"})], before=hold)
        await b.say(f"please remember my pin {SECRET}")
        await asyncio.wait_for(asked.wait(), TIMEOUT_S)  # b's turn is in the model
        sent = len(server.chat_requests)

        answer = await a.command("/forget last")
        released.set()

        assert answer.startswith("Forgot exchange 2:"), answer  # a itself had nothing under way
        await _until(lambda: len(b.delivered) == 2, "b's turn ends")
        assert all(SECRET not in json.dumps(r.body) for r in server.chat_requests[sent:])
        assert (b.delivered[-1].kind, b.delivered[-1].text) == ("error", ERASED)
        assert "ignored" not in caplog.text  # no close written for the exchange the forget erased
        history = "\n".join(m.text for m in await a.engine.chats.history(CHAT))
        assert SECRET not in history and "the weather is nice today" in history
        assert await _secret_left(a.engine) == 0
        await a.say("and now?")
        await _until(lambda: len(a.delivered) == 1, "a answers the next message")
        assert a.delivered[-1].text == "echo: and now?"
        assert SECRET not in json.dumps(server.chat_requests[-1].body)
