"""Two `klaw engine` processes on one PostgreSQL database (docs/decisions/170-chat-leases.md), as a
household with two machines runs them: each its own KLAW_HOME and socket, one database.

A burst of messages to 20 chats reaches both engines (each chat's messages alternate between them); one
engine is SIGKILLed mid-burst. Checked from the database: every acknowledged message is stored once and
answered, by exactly one exchange; no chat's turns overlap in time (the exchange records' times); the
killed engine's acknowledged messages are answered by the other once its leases expired."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from klaw.engine.frames import AckFrame, HelloFrame, InboundFrame, decode_frame, encode_frame
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"
CHATS = 20
LEASE_SECONDS = 1.5
START_TIMEOUT_S = 120.0  # a safety net: two engines start side by side on a loaded machine
ANSWER_TIMEOUT_S = 120.0
KILL_AFTER = 25  # of engine a's acknowledgements (of the 50 messages sent to it)


@dataclass
class _Engine:
    home: KlawHome
    process: asyncio.subprocess.Process
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    acks: dict[str, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))
    gone: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, message_id: str, chat_id: str) -> bool:
        """Send one message and wait for its acknowledgement; False if the engine is gone first."""
        frame = InboundFrame(id=message_id, channel="burst", chat_id=chat_id, text=f"tell me about {message_id}")
        if self.gone.is_set():
            return False
        try:
            self.writer.write(encode_frame(frame))
            await self.writer.drain()
            acked = asyncio.ensure_future(self.acks[message_id].wait())
            await asyncio.wait([acked, asyncio.ensure_future(self.gone.wait())], return_when=asyncio.FIRST_COMPLETED)
            return acked.done()
        except OSError:
            return False

    async def read_forever(self) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while line := await self.reader.readline():
                frame = decode_frame(line)
                if isinstance(frame, AckFrame):
                    self.acks[frame.id].set()
        self.gone.set()


def _write_config(home: KlawHome, base_url: str) -> None:
    home.config_file.write_text(
        "models:\n"
        f"  fake/slow:\n    baseUrl: {base_url}\n    contextBudget: 8000\n    maxRetries: 0\n"
        "routing:\n  default: fake/slow\n"
        "embedder:\n  backend: fake\n  dim: 384\n"
        "summarizer:\n  enabled: false\n"
        "processing:\n  debounceMs: 50\n  maxConcurrentLlm: 8\n"
        f"database:\n  backend: postgres\n  urlEnv: {VARIABLE}\n  leaseSeconds: {LEASE_SECONDS}\n",
        encoding="utf-8",
    )


@contextlib.asynccontextmanager
async def _engine(root: Path, base_url: str, dsn: str) -> AsyncIterator[_Engine]:
    home = KlawHome(root)
    initialise_home(home)
    _write_config(home, base_url)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "klaw",
        "engine",
        env={**os.environ, "KLAW_HOME": str(root), VARIABLE: dsn},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=(root / "engine.err").open("wb"),
    )
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while True:
                assert process.returncode is None, (root / "engine.err").read_text()[-2000:]
                with contextlib.suppress(OSError):
                    reader, writer = await asyncio.open_unix_connection(str(home.socket_path), limit=4 << 20)
                    break
                await asyncio.sleep(0.05)
        writer.write(encode_frame(HelloFrame(channels=["burst"])))
        engine = _Engine(home, process, reader, writer)
        reading = asyncio.create_task(engine.read_forever())
        yield engine
        reading.cancel()
        writer.close()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()


def _exchanges(dsn: str) -> dict[str, list[tuple[int, int | None, str, int | None]]]:
    """Per chat: (started_at, ended_at, status, user_message_rowid) of every exchange, by start."""
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT c.chat_id, e.started_at, e.ended_at, e.status, e.user_message_rowid FROM exchanges e"
            " JOIN chats c ON c.id = e.chat ORDER BY e.started_at, e.id"
        ).fetchall()
    by_chat: dict[str, list[tuple[int, int | None, str, int | None]]] = defaultdict(list)
    for chat_id, started, ended, status, rowid in rows:
        by_chat[chat_id].append((started, ended, status, rowid))
    return by_chat


def _stored(dsn: str) -> dict[str, tuple[str, int]]:
    """Every stored user message: id → (chat id, rowid)."""
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT m.id, m.chat_id, m.rowid FROM messages m WHERE m.role = 'user' AND m.type = 'text'"
        ).fetchall()
    return {str(message_id): (str(chat_id), int(rowid)) for message_id, chat_id, rowid in rows}


NOT_ANSWERS = ("open", "interrupted")
"""An exchange still running, or one a kill cut off and the other engine closed so (decision 306): neither
answered its message; the exchange that answers it after the takeover carries the same rowid."""


def _unanswered(dsn: str, acked: set[str]) -> set[str]:
    stored = _stored(dsn)
    answered_up_to: dict[str, int] = {}
    for chat_id, exchanges in _exchanges(dsn).items():
        done = [rowid for _, _, status, rowid in exchanges if status not in NOT_ANSWERS and rowid is not None]
        answered_up_to[chat_id] = max(done, default=0)
    return {m for m in acked if m not in stored or stored[m][1] > answered_up_to.get(stored[m][0], 0)}


async def _until_answered(dsn: str, acked: set[str]) -> None:
    """Poll the database (the engines are other processes: nothing here can signal)."""
    for _ in itertools.count():
        if not _unanswered(dsn, acked):
            return
        await asyncio.sleep(0.2)


async def test_two_engines_serve_twenty_chats_without_overlap_and_one_takes_over_when_the_other_is_killed(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    # Every turn takes a while, so turns of one chat in two engines would overlap if nothing kept them apart.
    async with (
        FakeOpenAiServer(latency=lambda: asyncio.sleep(0.3)) as server,
        _engine(tmp_path / "a", server.base_url, dsn) as a,
        _engine(tmp_path / "b", server.base_url, dsn) as b,
    ):
        acked: dict[str, str] = {}  # message id → the engine that acknowledged it
        killed_with: set[str] = set()  # what engine a had acknowledged and not answered when it died

        async def chat(n: int, rounds: range) -> None:
            for r in rounds:
                engine = (a, b)[(n + r) % 2]
                message_id = f"c{n}-m{r}"
                if not await engine.send(message_id, f"c{n}") and not await b.send(message_id, f"c{n}"):
                    continue  # as a gateway would, a message engine a never acknowledged goes to b
                acked[message_id] = "a" if message_id in a.acks and a.acks[message_id].is_set() else "b"
                if sum(1 for e in acked.values() if e == "a") == KILL_AFTER and not a.gone.is_set():
                    # Mid-burst, right after an acknowledgement: its turn (and others) cannot have run yet.
                    a.process.send_signal(signal.SIGKILL)
                    killed_with.update(m for m, e in acked.items() if e == "a")
                    killed_with.intersection_update(_unanswered(dsn, set(killed_with)))
                await asyncio.sleep(0.02 * (n % 3))

        await asyncio.gather(*(chat(n, range(5)) for n in range(CHATS)))

        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            await _until_answered(dsn, set(acked))

    assert killed_with, "the kill came after engine a had answered everything: nothing was taken over"
    stored = _stored(dsn)
    assert set(acked) <= set(stored)  # every acknowledged message stored (once: ids are unique)
    for chat_id, exchanges in _exchanges(dsn).items():
        closed = [(start, end, rowid) for start, end, status, rowid in exchanges if status not in NOT_ANSWERS]
        # Each closed exchange answers messages no other answered: its last message is newer than the previous one's.
        rowids = [rowid or 0 for _, _, rowid in closed]
        assert rowids == sorted(set(rowids)), f"chat {chat_id}: a message answered twice"
        # A chat's turns never overlap: each starts after the one before ended (times are the engines' own).
        for (_, end, _), (start, _, _) in itertools.pairwise(closed):
            assert end is not None and start >= end, f"chat {chat_id}: two turns at once"
        # An exchange left open (or closed interrupted) is the killed engine's (its turn died with it); none of b's.
        assert sum(1 for *_, status, _ in exchanges if status in NOT_ANSWERS) <= 1
