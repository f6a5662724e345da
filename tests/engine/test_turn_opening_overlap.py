"""A chat turn's exchange opening is written while its context is read (turn_runner.py).

The opening is a log record, fsync'd, then a database row: a few milliseconds on a real disk that the
turn used to wait for before it read a word of its context. Nothing a context layer reads is in it,
so the two now run side by side, and the model is asked only once both are done. The disk is stalled
here by keeping the log's own threads busy and holding every log append where it runs (the database
thread writes a record's line itself when it is idle, decision 519), as a slow fsync would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from klaw.engine.clock import ManualClock
from klaw.engine.tool_loop import LoopOutcome
from klaw.engine.turn_runner import Turn, TurnFailure, TurnPrompt, TurnRunner
from klaw.llm.function_model import FunctionModel
from klaw.llm.messages import ChatMessage
from klaw.memory import conversation_log
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord
from klaw.store.sqlite import connection as sqlite_connection
from klaw.tools.registry import ToolRegistry
from tests.engine.harness import CHAT, running_engine


@contextmanager
def log_stalled() -> Iterator[None]:
    """Every log append waits until the block ends, like a slow disk: the threads that write the
    conversation log busy (the log's own, and the ones SQLite runs a record's log write on before its
    row, decision 211), and an append started elsewhere (the idle database thread's, decision 519) held."""
    release = threading.Event()
    pools = (conversation_log._LOG_THREADS, sqlite_connection._FIRST_THREADS)
    busy = [pool.submit(release.wait) for pool in pools for _ in range(pool._max_workers)]
    append = conversation_log._append_lines

    def held(path: Path, lines: list[str]) -> None:
        release.wait(30)
        append(path, lines)

    conversation_log._append_lines = held  # read at each call, by its module
    try:
        yield
    finally:
        release.set()
        conversation_log._append_lines = append
        for job in busy:
            job.result(timeout=10)


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(60):  # a safety net: the loop ends on the condition
        while not condition():  # noqa: ASYNC110 - the context history has no event to wait on
            await asyncio.sleep(0.01)


async def test_the_context_is_read_while_the_exchange_opening_waits_for_the_disk(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("hello")
        await h.say("what did I say?")  # accepted: durable in the log before the stall
        with log_stalled():
            await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
            # The turn's context is built although its opening record cannot reach the log yet...
            await until(lambda: len(h.engine.processor.context_history.turns(CHAT)) == 2)
            assert len(h.server.chat_requests) == 1  # ...and the model is asked only once it is written
        await h.wait_for_replies(2)
        assert h.delivered[-1].text == "echo: what did I say?"
        [first, second] = await h.engine.chats.turns(CHAT)
        assert (first.status, second.status) == ("completed", "completed")


class _Sink:
    """A turn's sink whose opening finishes only when told, recording what happened in order."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.open = asyncio.Event()

    async def begin(self) -> None:
        await self.open.wait()
        self.events.append("opened")

    async def finish(self, outcome: LoopOutcome) -> None:
        self.events.append("finished")

    async def fail(self, failure: TurnFailure) -> None:
        self.events.append(f"failed: {failure.kind}")


def _runner(tmp_path: Path) -> TurnRunner:
    return TurnRunner(
        model_for=lambda _model: FunctionModel(lambda _messages, _info: "fine"),
        tools=ToolRegistry(),
        workspace=tmp_path,
        clock=ManualClock(datetime(2026, 1, 1, tzinfo=UTC)),
        max_rounds=3,
    )


async def _record(records: Sequence[MessageRecord]) -> None:
    return None


async def test_a_failing_context_waits_for_the_opening_so_the_failure_closes_it(tmp_path: Path) -> None:
    sink = _Sink()

    async def context() -> TurnPrompt:
        asyncio.get_running_loop().call_later(0.05, sink.open.set)  # the opening finishes after the error
        raise RuntimeError("the context could not be read")

    turn = Turn("turn of chat console:me", CHAT, context, _record, sink, begin_alongside_context=True)
    async with asyncio.timeout(10):
        result = await _runner(tmp_path).run(turn)
    assert isinstance(result, TurnFailure) and result.kind == "RuntimeError"
    assert sink.events == ["opened", "failed: RuntimeError"]


async def test_a_task_runs_begin_comes_before_its_context(tmp_path: Path) -> None:
    """A task run's begin writes the request into the log its context reads: never side by side."""
    sink = _Sink()
    sink.open.set()

    async def context() -> TurnPrompt:
        sink.events.append("context")
        return TurnPrompt([ChatMessage.user("digest")], [], "fake/model")

    turn = Turn("run of task digest", ChatRef("scheduler", "digest"), context, _record, sink)
    async with asyncio.timeout(10):
        outcome = await _runner(tmp_path).run(turn)
    assert isinstance(outcome, LoopOutcome) and outcome.status is ExchangeStatus.COMPLETED
    assert sink.events == ["opened", "context", "finished"]
