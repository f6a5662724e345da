"""An engine that stalls past its chat's lease writes nothing to the chat when it wakes
(docs/decisions/200-lease-fencing.md): two `klaw engine` processes on one real PostgreSQL database; the
first is SIGSTOPped while its turn waits for the model (held until then), the second takes the chat over once the lease
expired and answers it; woken (SIGCONT), the first gets its model's answer and must not store a second
reply, close a second exchange, or apologise."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from pathlib import Path

import psycopg

from klaw.llm.fake_server import FakeOpenAiServer
from tests.conftest import new_database
from tests.engine.test_several_engines import _engine, _exchanges
from tests.pg_server import PgServer

TIMEOUT_S = 120.0  # a safety net: every wait polls for what the engines did


def _holder(dsn: str, chat_id: str) -> str | None:
    with psycopg.connect(dsn) as connection:
        row = connection.execute(
            "SELECT l.holder FROM chat_leases l JOIN chats c ON c.id = l.chat WHERE c.chat_id = %s", (chat_id,)
        ).fetchone()
    return None if row is None else str(row[0])


def _replies(dsn: str, chat_id: str) -> int:
    with psycopg.connect(dsn) as connection:
        row = connection.execute(
            "SELECT count(*) FROM messages WHERE chat_id = %s AND role = 'assistant' AND type = 'text'", (chat_id,)
        ).fetchone()
    return int(row[0]) if row else 0


async def _poll(check: Callable[[], bool], what: str) -> None:
    """Poll the database or a log (the engines are other processes: nothing here can signal)."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT_S
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"not within {TIMEOUT_S} s: {what}"
        await asyncio.sleep(0.05)


async def test_an_engine_woken_after_another_took_its_chat_over_writes_no_second_reply(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    # The first engine's model call is held until that engine is stopped, then answered (and every call after
    # it at once). It was held 3 s and the engine stopped 0.5 s after it took the lease: under CI's load the
    # call had not begun by then, or had been answered before the stop (decision 486).
    asked, stopped = asyncio.Event(), asyncio.Event()

    async def held() -> None:
        asked.set()
        await stopped.wait()

    async with FakeOpenAiServer() as server, contextlib.AsyncExitStack() as stack:
        server.reply_text("the stalled engine's late reply", before=held)  # the first chat call: a's
        # the two engines start side by side (most of the test's time is starting them)
        a, b = await asyncio.gather(
            *(stack.enter_async_context(_engine(tmp_path / name, server.base_url, dsn)) for name in "ab")
        )
        assert await a.send("m1", "stalled")
        pid = f":{a.process.pid}:"
        await _poll(lambda: (_holder(dsn, "stalled") or "").count(pid) == 1, "a holds the chat's lease")
        async with asyncio.timeout(TIMEOUT_S):  # a safety net: its turn asks the model, b has nothing to do
            await asked.wait()
        a.process.send_signal(signal.SIGSTOP)  # a stalls: its lease is not renewed
        stopped.set()  # its answer waits in the socket for it
        try:
            # b finds the message unanswered under an expired lease, takes the chat over and answers.
            await _poll(lambda: _replies(dsn, "stalled") == 1, "b answers")
            assert pid not in (_holder(dsn, "stalled") or pid.strip(":") + "-none")
        finally:
            a.process.send_signal(signal.SIGCONT)
        errors = tmp_path / "a" / "engine.err"
        # a wakes with its model's answer in hand: its reply is refused, the turn abandoned.
        woke = lambda: "abandoned" in errors.read_text(errors="replace") or _replies(dsn, "stalled") > 1  # noqa: E731
        await _poll(woke, "a wakes")
        await asyncio.sleep(1.0)  # anything a would still write
        assert b.process.returncode is None and a.process.returncode is None

    log = errors.read_text(errors="replace")
    assert _replies(dsn, "stalled") == 1, "the stalled engine stored a second reply"
    # a's exchange is left open, or closed as interrupted by b's turn answering its message (decision 306)
    closed = [e for e in _exchanges(dsn)["stalled"] if e[2] not in ("open", "interrupted")]
    assert len(closed) == 1, f"two exchanges answered the message: {closed}"
    assert "abandoned" in log and "another engine took the chat" in log
    assert "telling the person" not in log and "Traceback" not in log
