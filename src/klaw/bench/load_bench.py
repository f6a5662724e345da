"""`klaw bench load`: many chats through a real `klaw engine` subprocess's socket, for a bounded time.

What a person's gateways do under load: each chat sends a message, waits for its acknowledgement and
its reply, and sends the next, until the time is up. The model is the fake OpenAI server answering at
once, so the figures are the engine's own cost: turns per second, and send → reply latency (p50/p95).
The check that matters is "acknowledged = stored = answered": every message the engine acknowledged
is in klaw.db as a user message and got a reply.

It also reads the engine process's memory from /proc once the chats are answered and the messages
embedded (no embedding job left, at most `IDLE_TIMEOUT_S` later): resident then (an idle engine after
the load) and at its peak. With `embedder="minilm"` the engine embeds every message
with the local model, so this is the figure of a real engine with its embedder loaded.

`kill_after` SIGKILLs the engine mid-run and starts it again: a chat whose connection broke sends
again what was not acknowledged (same id, as the gateway's buffer does), and every message
acknowledged before the kill must still be answered after the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from klaw.bench.stats import Latency
from klaw.engine.frames import AckFrame, FrameError, HelloFrame, InboundFrame, OutboundFrame, decode_frame, encode_frame
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer

START_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 60.0
IDLE_TIMEOUT_S = 120.0


@dataclass
class LoadResult:
    chats: int
    seconds: float
    debounce_ms: int
    killed: bool
    turns: int
    turns_per_second: float
    latency: Latency
    acknowledged: int
    stored: int
    answered: int
    unanswered_ids: list[str] = field(default_factory=list)
    embedder: str = "fake"
    rss_mb: float | None = None  # the engine's resident memory once every reply is in (None: no /proc)
    peak_rss_mb: float | None = None
    own_mb: float | None = None  # of rss_mb, its own memory (RssAnon); the rest: files mapped

    @property
    def consistent(self) -> bool:
        return self.acknowledged == self.stored == self.answered


@dataclass
class _Chat:
    """One chat's client: its own connection and channel (outbound frames are routed by channel)."""

    index: int
    acked: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    sent_at: dict[str, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    next_id: int = 0

    @property
    def channel(self) -> str:
        return f"load{self.index}"


def _write_config(home: KlawHome, base_url: str, debounce_ms: int, embedder: str) -> None:
    embedding = (
        "embedder:\n  backend: fake\n  dim: 384\n" if embedder == "fake" else f"embedder:\n  backend: {embedder}\n"
    )
    home.config_file.write_text(
        "models:\n"
        f"  fake/fast:\n    baseUrl: {base_url}\n    contextBudget: 8000\n    maxRetries: 0\n"
        "routing:\n  default: fake/fast\n"
        f"{embedding}"
        "summarizer:\n  enabled: false\n"
        f"processing:\n  debounceMs: {debounce_ms}\n",
        encoding="utf-8",
    )


async def _start_engine(home: KlawHome) -> asyncio.subprocess.Process:
    env = {**os.environ, "KLAW_HOME": str(home.root)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "klaw",
        "engine",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_unix_connection(str(home.socket_path))
            writer.close()
            return process
        if process.returncode is not None:
            raise RuntimeError(f"klaw engine exited with {process.returncode} at start")
        await asyncio.sleep(0.05)
    process.kill()
    raise RuntimeError("klaw engine did not open its socket in time")


async def _run_chat(chat: _Chat, socket_path: Path, until: float, drain_until: list[float]) -> None:
    """Send, wait for the ack and the reply, repeat until `until`; after a broken connection, reconnect
    and send the unacknowledged message again (as a gateway replays its buffer); at the end wait for
    the replies to every acknowledged message, up to `drain_until`."""
    pending: InboundFrame | None = None
    while True:
        try:
            reader, writer = await asyncio.open_unix_connection(str(socket_path), limit=4 << 20)
        except OSError:
            if time.monotonic() > drain_until[0]:
                return
            await asyncio.sleep(0.05)
            continue
        try:
            writer.write(encode_frame(HelloFrame(channels=[chat.channel])))
            if pending is not None:  # not acknowledged before the connection broke: send it again
                writer.write(encode_frame(pending))
            await writer.drain()
            while True:
                if pending is None and chat.acked <= chat.answered:
                    if time.monotonic() >= until:
                        return
                    message_id = f"{chat.channel}-{chat.next_id}"
                    chat.next_id += 1
                    pending = InboundFrame(id=message_id, channel=chat.channel, chat_id="c", text=f"hello {message_id}")
                    chat.sent_at[message_id] = time.monotonic()
                    writer.write(encode_frame(pending))
                    await writer.drain()
                left = drain_until[0] - time.monotonic()
                if left <= 0:
                    return
                async with asyncio.timeout(left):  # not wait_for, which can drop a cancel (decision 428)
                    line = await reader.readline()
                if not line:
                    raise ConnectionResetError
                pending = _take(chat, line, pending)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            writer.close()
            if time.monotonic() > drain_until[0]:
                return
            await asyncio.sleep(0.05)


def _take(chat: _Chat, line: bytes, pending: InboundFrame | None) -> InboundFrame | None:
    """Record one frame from the engine; the message still to (re)send, if any."""
    try:
        frame = decode_frame(line)
    except FrameError:
        return pending
    if isinstance(frame, AckFrame) and pending is not None and frame.id == pending.id:
        chat.acked.add(frame.id)
        return None
    reply_to = frame.reply_to if isinstance(frame, OutboundFrame) and frame.kind == "reply" else None
    if reply_to is not None and reply_to not in chat.answered:
        chat.answered.add(reply_to)
        chat.latencies.append(time.monotonic() - chat.sent_at.get(reply_to, time.monotonic()))
    return pending


def _memory_mb(pid: int) -> tuple[float | None, float | None, float | None]:
    """(resident, peak resident, own resident) of a process in MB, from /proc (Nones where there is none).

    Resident memory counts the pages of files the engine maps (its libraries, the int8 vector copy): the
    OS's file cache, which it takes back when memory is short. RssAnon is the engine's own memory."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None, None, None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)

    def mb(name: str) -> float | None:
        value = fields.get(name, "").split()
        return round(int(value[0]) / 1024, 1) if value else None

    return mb("VmRSS"), mb("VmHWM"), mb("RssAnon")


def _count(database: Path, sql: str) -> int:
    connection = apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(next(iter(connection.execute(sql)))[0])
    finally:
        connection.close()


def _stored_user_messages(database: Path) -> int:
    return _count(database, "SELECT count(*) FROM messages WHERE role = 'user' AND type = 'text'")


async def _embedded(database: Path, deadline: float) -> None:
    """Until the engine has no embedding job left (its idle state after the load), or `deadline`."""
    # Polled: the engine is another process, and its queue says nothing to this one.
    while time.monotonic() < deadline and _count(database, "SELECT count(*) FROM embedding_jobs") > 0:  # noqa: ASYNC110
        await asyncio.sleep(0.2)


async def measure_load(
    root: Path,
    *,
    chats: int = 50,
    seconds: float = 20.0,
    debounce_ms: int = 0,
    kill_after: float | None = None,
    embedder: str = "fake",
) -> LoadResult:
    """Drive `chats` chats for `seconds` against a `klaw engine` subprocess on a fresh home under `root`,
    whose embedder is `embedder` (`fake`, or a local backend such as `minilm`)."""
    home = KlawHome(root)
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        _write_config(home, server.base_url, debounce_ms, embedder)
        engine = await _start_engine(home)
        clients = [_Chat(n) for n in range(chats)]
        started = time.monotonic()
        until = started + seconds
        drain_until = [until + DRAIN_TIMEOUT_S]
        tasks = [asyncio.create_task(_run_chat(chat, home.socket_path, until, drain_until)) for chat in clients]
        killed = False
        try:
            if kill_after is not None:
                await asyncio.sleep(kill_after)
                engine.send_signal(signal.SIGKILL)
                await engine.wait()
                killed = True
                engine = await _start_engine(home)
            await asyncio.gather(*tasks)
            elapsed = time.monotonic() - started
            await _embedded(home.database_file("klaw.db"), time.monotonic() + IDLE_TIMEOUT_S)
            rss_mb, peak_rss_mb, own_mb = _memory_mb(engine.pid)
        finally:
            for task in tasks:
                task.cancel()
            if engine.returncode is None:
                engine.send_signal(signal.SIGTERM)
                try:
                    async with asyncio.timeout(60):
                        await engine.wait()
                except TimeoutError:
                    engine.kill()
    acked = set().union(*(chat.acked for chat in clients))
    answered = set().union(*(chat.answered for chat in clients)) & acked
    turns = sum(len(chat.answered) for chat in clients)
    return LoadResult(
        chats=chats,
        seconds=round(elapsed, 2),
        debounce_ms=debounce_ms,
        killed=killed,
        turns=turns,
        turns_per_second=turns / min(elapsed, seconds) if elapsed else 0.0,
        latency=Latency.of([s for chat in clients for s in chat.latencies]),
        acknowledged=len(acked),
        stored=_stored_user_messages(home.database_file("klaw.db")),
        answered=len(answered),
        unanswered_ids=sorted(acked - answered)[:20],
        embedder=embedder,
        rss_mb=rss_mb,
        peak_rss_mb=peak_rss_mb,
        own_mb=own_mb,
    )
