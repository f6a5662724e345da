"""An exchange whose opening the log took but the full database refused is closed as failed, not left open.

The turn's sink reserves an exchange id and logs its `exchange_open`; on a full disk the log's line
fits where SQLite's pages do not (SQLITE_FULL for real: `PRAGMA max_page_count`). The turn failed and
the apology went out, but no close was written, since the sink held no stored opening: after space
was freed and the engine restarted, the log's replay stored an exchange `open` for good (decision 400).
"""

from __future__ import annotations

import json

import apsw

from klaw.engine.clock import ManualClock
from klaw.engine.frames import AckFrame, InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.exchange_records import opened_exchange_id
from klaw.store.records import ExchangeStatus
from klaw.store.sqlite.store import SqliteStore
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import engine_config
from tests.engine.test_full_disk import DEBOUNCE_S, cap_database


async def fill_database(engine: Engine) -> None:
    """Cap klaw.db at its size, as a full disk does, and make each new message need new pages."""

    def fill(connection: apsw.Connection) -> None:
        connection.execute("CREATE TABLE IF NOT EXISTS filler (b BLOB)")
        pages = int(next(iter(connection.execute("PRAGMA page_count")))[0])
        connection.execute(f"PRAGMA max_page_count = {pages}")
        # A row fits in its table's half-empty page; on a full disk a new row also needs room the disk
        # no longer has: each new message asks for a page more, which SQLite itself refuses (SQLITE_FULL).
        connection.execute(
            "CREATE TEMP TRIGGER a_full_disk AFTER INSERT ON main.messages"
            " BEGIN INSERT INTO main.filler VALUES (zeroblob(65536)); END"
        )

    assert isinstance(engine.store, SqliteStore)
    await engine.store.db.run(fill)


def logged_opening(home: KlawHome) -> int:
    for path in home.conversations.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            exchange_id = opened_exchange_id(json.loads(line).get("metadata"))
            if exchange_id is not None:
                return exchange_id
    raise AssertionError("no exchange_open record in the log")


async def test_an_opening_only_the_log_took_is_closed_as_failed() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            config = engine_config(server.base_url, processing={"debounceMs": int(DEBOUNCE_S * 1000)})
            clock = ManualClock()
            engine = await Engine.start(home, config, clock=clock)
            try:
                gateway = await GatewayClient.connect(home.socket_path)
                try:
                    await gateway.send_bytes(b'{"type":"hello","channels":["web"]}\n')
                    await gateway.send(InboundFrame(id="m1", channel="web", chat_id="main", text="hello"))
                    assert await gateway.recv() == AckFrame(id="m1")
                    await fill_database(engine)  # the disk fills before the turn opens its exchange
                    await clock.advance(DEBOUNCE_S)
                    apology = await gateway.recv()
                    assert isinstance(apology, OutboundFrame) and apology.kind == "error"
                    assert "disk is full" in apology.text
                finally:
                    await gateway.aclose()
            finally:
                await cap_database(engine, None)
                await engine.shutdown(timeout_seconds=5)
            exchange_id = logged_opening(home)
            engine = await Engine.start(home, config, clock=ManualClock())  # space freed: the log is replayed
            try:
                exchange = await engine.store.exchanges.get(exchange_id)
                assert exchange is not None and exchange.status == ExchangeStatus.FAILED
            finally:
                await engine.shutdown(timeout_seconds=5)
