"""`tools.messageSendsPerChatPerHour` holds across engine restarts (docs/decisions/418-durable-send-counts.md):
the hour's sends into a chat are counted in the store, so a model cannot send the cap again right after
a restart (or a `klaw engine` systemd restarted), the calls of one answer never pass it together, and a
send that reached nobody gives its place back for good. Whole engines through the library API
(`Engine.start` without a socket, replies and Telegram deliveries caught in process), restarted on
one home: a real klaw.db, and the tests' real PostgreSQL; and two engines on one PostgreSQL database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.fake_wire import Reply, TextReply, ToolCallsReply
from klaw.store.records import ChatRef
from tests.conftest import new_database
from tests.engine import harness
from tests.engine.harness import Harness, engine_config
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once on klaw.db in the home, once on a fresh PostgreSQL database."""
    if request.param == "postgres":
        server: PgServer = request.getfixturevalue("postgres_server")
        monkeypatch.setenv(VARIABLE, server.dsn(new_database(server)))
        monkeypatch.setattr(harness, "DATABASE", {"backend": "postgres", "urlEnv": VARIABLE})
    return str(request.param)


class Home:
    """One home, one fake model server and one clock, for engines started one after the other."""

    def __init__(self, root: Path, server: FakeOpenAiServer) -> None:
        self.home = KlawHome(root / "home")
        initialise_home(self.home)
        self.server = server
        self.clock = ManualClock()
        self.telegram: list[str] = []  # what reached telegram:42, across engines

    @asynccontextmanager
    async def engine(self, *, telegram: bool = True, **tools: Any) -> AsyncIterator[Harness]:
        """An engine on this home; `telegram`: whether a Telegram channel runs in it (without one, and
        without a socket to queue for one, a send there reaches nobody)."""
        config = engine_config(
            self.server.base_url,
            channels={"telegram": {"enabled": True, "allowedChatIds": [42]}},
            tools={"messageSendsPerTurn": 10, **tools},
        )
        engine = await Engine.start(self.home, config, clock=self.clock, listen=False)
        h = Harness(engine, self.server, self.clock, self.home)
        engine.delivery.register("console", h.record)
        if telegram:

            async def to_telegram(outbound: Outbound) -> None:
                self.telegram.append(outbound.text)

            engine.delivery.register("telegram", to_telegram)
        try:
            yield h
        finally:
            await engine.shutdown(timeout_seconds=5)


@asynccontextmanager
async def one_home(tmp_path: Path) -> AsyncIterator[Home]:
    async with FakeOpenAiServer() as server:
        yield Home(tmp_path, server)


def _sends(count: int, first: int = 0) -> list[tuple[str, dict[str, str]]]:
    return [("message_send", {"target": "telegram:42", "text": f"part {first + i}"}) for i in range(count)]


async def _turn(h: Harness, sends: int, first: int = 0) -> list[str]:
    """One turn whose answer asks for `sends` messages to telegram:42 at once; the tool results."""
    h.server.reply_tool_calls(_sends(sends, first))
    h.server.reply_text("Done.")
    await h.turn(f"send {sends}")
    messages = h.last_request_messages()
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")  # earlier turns' are history
    return [str(m["content"]) for m in messages[last_user:] if m["role"] == "tool"]


def _hour_refusal(sent: int, minutes: int, frees: str) -> str:
    return (
        f"not sent: telegram:42 has had {sent} message(s) from message_send in the last hour, the most"
        f" tools.messageSendsPerChatPerHour allows; the next may go in {minutes} minute(s) (at {frees} UTC): do not"
        " try again before then. The person can raise the cap in engine.yaml (then restart klaw)."
    )


async def test_a_restarted_engine_refuses_the_send_past_the_hours_cap(tmp_path: Path, backend: str) -> None:
    """The old engine forgot the hour's sends when it stopped: right after a restart the model could send
    the cap again."""
    async with one_home(tmp_path) as home:
        start = home.clock.now()
        async with home.engine(messageSendsPerChatPerHour=2) as h:
            assert await _turn(h, 2) == ["Sent to telegram:42."] * 2
        await home.clock.advance(10 * 60)

        async with home.engine(messageSendsPerChatPerHour=2) as h:
            results = await _turn(h, 1, first=2)

        frees = (start + timedelta(hours=1)).strftime("%H:%M")
        assert results == [_hour_refusal(2, 50, frees)]
        assert home.telegram == ["part 0", "part 1"]


async def test_the_sends_of_one_answer_after_a_restart_never_pass_the_cap(tmp_path: Path, backend: str) -> None:
    """Six sends at once, one place of the hour's four taken before the restart: three go."""
    async with one_home(tmp_path) as home:
        start = home.clock.now()
        async with home.engine(messageSendsPerChatPerHour=4) as h:
            assert await _turn(h, 1) == ["Sent to telegram:42."]
        await home.clock.advance(60)

        async with home.engine(messageSendsPerChatPerHour=4) as h:
            results = await _turn(h, 6, first=1)

        frees = (start + timedelta(hours=1)).strftime("%H:%M")
        assert sorted(results) == sorted(["Sent to telegram:42."] * 3 + [_hour_refusal(4, 59, frees)] * 3)
        assert len(home.telegram) == 4


async def test_a_send_that_reached_nobody_gives_its_place_back(tmp_path: Path, backend: str) -> None:
    """Two an hour: one delivered; one to a Telegram no channel runs for (nothing sent, its place given
    back); after the restarts one more goes, not two (the first still counts) and not none (the second
    does not)."""
    async with one_home(tmp_path) as home:
        start = home.clock.now()
        async with home.engine(messageSendsPerChatPerHour=2) as h:
            assert await _turn(h, 1) == ["Sent to telegram:42."]
        async with home.engine(telegram=False, messageSendsPerChatPerHour=2) as h:
            [unsent] = await _turn(h, 1, first=1)
            # refused with the arguments, before any place is taken (decision 435): the model reads why
            assert unsent.startswith("invalid arguments:")
            assert "nothing was sent: no channel 'telegram' is running with this engine" in unsent
        await home.clock.advance(60)

        async with home.engine(messageSendsPerChatPerHour=2) as h:
            results = await _turn(h, 3, first=2)

        frees = (start + timedelta(hours=1)).strftime("%H:%M")
        assert sorted(results) == sorted(["Sent to telegram:42."] + [_hour_refusal(2, 59, frees)] * 2)
        # which of the three goes is the store's order (PostgreSQL: whichever connection locked first)
        assert (
            home.telegram[0] == "part 0"
            and len(home.telegram) == 2
            and home.telegram[1] in {"part 2", "part 3", "part 4"}
        )


async def test_two_engines_on_one_postgres_database_share_the_hour(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two engines (each its own home, as on two machines) on one PostgreSQL database, a turn in each at
    the same moment asking for three sends into telegram:42, three an hour allowed: three go in all, not
    three from each (each engine counted apart)."""
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    monkeypatch.setattr(harness, "DATABASE", {"backend": "postgres", "urlEnv": VARIABLE})

    def answer(body: Mapping[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "tool":
            return TextReply("Done.")
        calls = _sends(3, first=10 if "from b" in str(body["messages"][-1]["content"]) else 0)
        return ToolCallsReply(tuple((f"call_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)))

    async with FakeOpenAiServer() as server:
        server.default_reply = answer
        a, b = Home(tmp_path / "a", server), Home(tmp_path / "b", server)
        async with a.engine(messageSendsPerChatPerHour=3) as on_a, b.engine(messageSendsPerChatPerHour=3) as on_b:
            await asyncio.gather(
                on_a.turn("send three from a", ChatRef("console", "a")),
                on_b.turn("send three from b", ChatRef("console", "b")),
            )

        results = [
            str(m["content"])
            for r in server.chat_requests
            if r.body["messages"][-1]["role"] == "tool"
            for m in r.body["messages"]
            if m["role"] == "tool"
        ]

    assert len(a.telegram) + len(b.telegram) == 3, (a.telegram, b.telegram)
    assert len(results) == 6 and sum(r.startswith("not sent: telegram:42 has had 3 message(s)") for r in results) == 3


async def test_a_send_whose_delivery_raised_still_counts(tmp_path: Path) -> None:
    """adversary21: a channel that showed each message and then raised (a library program's `on_message`, a
    second part failing after the first went) had the send's places given back, though the engine records a
    message before delivering it: three turns of three sends put nine messages through caps of 3 a turn and
    2 an hour. Such a send now keeps its places."""
    async with one_home(tmp_path) as home:
        config = engine_config(
            home.server.base_url,
            channels={"telegram": {"enabled": True, "allowedChatIds": [42]}},
            tools={"messageSendsPerTurn": 3, "messageSendsPerChatPerHour": 2},
        )
        engine = await Engine.start(home.home, config, clock=home.clock, listen=False)
        h = Harness(engine, home.server, home.clock, home.home)
        engine.delivery.register("console", h.record)
        shown: list[str] = []

        async def shows_then_raises(outbound: Outbound) -> None:
            shown.append(outbound.text)
            raise ConnectionError("the second part failed")

        engine.delivery.register("telegram", shows_then_raises)
        try:
            for n in range(3):
                await _turn(h, 3, first=3 * n)
        finally:
            await engine.shutdown(timeout_seconds=5)
    assert shown == ["part 0", "part 1"], shown  # the hour's two, not nine
