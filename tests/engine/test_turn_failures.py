"""Any failure inside a turn or a task run ends it as failed, tells the person with an error id the log
also names, and the engine serves the next message; shutdown closes the store even when a turn fails.

Failures come from real means: a workspace prompt file that is a UNIX socket (opening it raises ENXIO), the
chat's log file turned into a directory while the model thinks (every append fails, as on a full
disk), tool arguments nested deeper than the JSON parser's stack, a reply over the socket's 1 MiB frame.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
from pathlib import Path

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.delivery import Outbound
from klaw.engine.frames import MAX_FRAME_BYTES, AckFrame, HelloFrame, InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.engine.subagents import RunStatus, SubagentRequest
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.answer_cap import MAX_ANSWER_CHARS
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.conversation_log import ConversationLog
from klaw.scheduling.names import task_chat
from klaw.store.protocol import StorageError
from klaw.store.records import ExchangeStatus, MessageRecord, Role
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import CHAT, Harness, engine_config, running_engine

ERROR_ID = re.compile(r"\(error ([0-9a-f]{12})\)")


def break_prompt(home: KlawHome) -> None:
    """SOUL.md made unopenable: a folder or a FIFO there is left out of the prompt (decision 460), text that
    is not UTF-8 too (decision 503), but a UNIX socket (open: ENXIO) still fails the turn's prompt."""
    soul = home.workspace / "SOUL.md"
    soul.rename(home.workspace / "SOUL.md.saved")
    with contextlib.chdir(home.workspace), socket.socket(socket.AF_UNIX) as bound:
        bound.bind("SOUL.md")  # relative: a test's path may be longer than a socket address holds


def mend_prompt(home: KlawHome) -> None:
    (home.workspace / "SOUL.md").unlink()
    (home.workspace / "SOUL.md.saved").replace(home.workspace / "SOUL.md")


def error_id_logged(caplog: pytest.LogCaptureFixture, error_id: str, kind: str) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if error_id in r.getMessage()]
    assert lines and all(kind in line for line in lines)
    return lines


async def exchange_statuses(h: Harness) -> list[str]:
    return [turn.status for turn in await h.engine.chats.turns(CHAT)]


async def test_a_non_model_failure_in_a_turn_is_a_failed_exchange_an_apology_and_the_next_turn_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_engine(tmp_path) as h:
        break_prompt(h.home)
        with caplog.at_level(logging.WARNING):
            reply = await h.turn("this turn fails")
        assert reply.kind == "error"
        assert reply.text.startswith("Sorry, something went wrong")
        found = ERROR_ID.search(reply.text)
        assert found is not None
        lines = error_id_logged(caplog, found.group(1), "OSError")
        assert not any("this turn fails" in line for line in lines)  # never content
        assert await exchange_statuses(h) == [ExchangeStatus.FAILED]
        assert h.server.chat_requests == []

        mend_prompt(h.home)
        assert (await h.turn("and this one works")).text.endswith("and this one works")
        assert await exchange_statuses(h) == [ExchangeStatus.FAILED, ExchangeStatus.COMPLETED]


async def test_a_model_answer_that_never_ends_is_cut_off_said_and_kept_out_of_memory(tmp_path: Path) -> None:
    """A server that keeps writing (an adversary's 10 MB answer took 3 minutes and stalled every other
    chat's search for a while after): past MAX_ANSWER_CHARS the call ends with an error naming it, the
    text is stored nowhere, and the next turn works."""
    async with running_engine(tmp_path) as h:
        h.server.reply_text("B" * (MAX_ANSWER_CHARS + 1))
        reply = await h.turn("write forever")
        assert reply.kind == "error"
        assert f"passed {MAX_ANSWER_CHARS:,} characters without ending" in reply.text
        assert "max_tokens" in reply.text
        assert await exchange_statuses(h) == [ExchangeStatus.FAILED]
        logs = (h.home.root / "conversations").rglob("*.jsonl")
        assert not any("BBBBBBBB" in path.read_text(encoding="utf-8") for path in logs)
        assert (await h.turn("a short one")).text == "echo: a short one"


async def test_a_store_failure_during_a_turn_still_tells_the_person(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log refuses every append while the model thinks (as a full disk would): the reply cannot be
    recorded, nor the failed exchange, but the person is told, and the chat works once the disk does."""
    async with running_engine(tmp_path) as h:
        today = MessageRecord(CHAT, Role.USER, "", created_at=h.clock.now())
        log_file = ConversationLog(h.home.conversations).file_for(today)
        saved = log_file.with_suffix(".saved")

        async def disk_fails() -> None:
            log_file.rename(saved)
            log_file.mkdir()

        h.server.reply_text("an answer that cannot be stored", before=disk_fails)
        with caplog.at_level(logging.WARNING):
            reply = await h.turn("hello")
        assert reply.kind == "error"
        found = ERROR_ID.search(reply.text)
        assert found is not None
        error_id_logged(caplog, found.group(1), "IsADirectoryError")

        log_file.rmdir()
        saved.rename(log_file)
        assert (await h.turn("again")).text.endswith("again")


async def test_deeply_nested_tool_arguments_are_an_error_result_and_the_turn_goes_on(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        nested = '{"a": ' * 100_000 + "1" + "}" * 100_000
        h.server.reply_tool_calls([("current_time", nested)])
        h.server.reply_text("I could not read the time")
        reply = await h.turn("what time is it?")
        assert (reply.kind, reply.text) == ("reply", "I could not read the time")
        tool_result = h.last_request_messages()[-1]
        assert tool_result["role"] == "tool"
        assert "nested too deeply" in tool_result["content"]
        assert await exchange_statuses(h) == [ExchangeStatus.COMPLETED]


async def test_a_number_too_long_to_read_in_tool_arguments_is_an_error_result_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    """adversary22: an integer of 4,400 digits in a tool call's arguments (past Python's conversion limit)
    raised a plain ValueError, which failed the whole turn ("Sorry, something went wrong")."""
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("current_time", '{"timezone": ' + "9" * 4400 + "}")])
        h.server.reply_text("I could not read the time")
        reply = await h.turn("what time is it?")
        assert (reply.kind, reply.text) == ("reply", "I could not read the time")
        tool_result = h.last_request_messages()[-1]
        assert tool_result["role"] == "tool"
        assert "a number with more digits than can be read" in tool_result["content"]
        assert await exchange_statuses(h) == [ExchangeStatus.COMPLETED]


async def test_a_failing_task_run_is_recorded_failed_and_the_chat_is_told_with_an_error_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_engine(tmp_path) as h:
        runner = h.engine.scheduler.runner if h.engine.scheduler is not None else None
        assert runner is not None
        break_prompt(h.home)
        with caplog.at_level(logging.WARNING):
            outcome = await runner.spawn(SubagentRequest("digest", "summarise", inject_into=CHAT))
        assert (outcome.status, outcome.delivered) == (RunStatus.FAILED, False)
        await h.wait_for_replies(1)
        notice = h.delivered[0]
        assert notice.kind == "notice"
        assert notice.text.startswith("The task 'digest' could not run")
        found = ERROR_ID.search(notice.text)
        assert found is not None
        error_id_logged(caplog, found.group(1), "OSError")
        log = ConversationLog(h.home.conversations)
        records = (await log.read(log.files(log.chat_dir(task_chat("digest"))))).records
        assert records[-1].metadata == {"run_status": "failed"}

        mend_prompt(h.home)
        outcome = await runner.spawn(SubagentRequest("digest", "summarise", inject_into=CHAT))
        assert (outcome.status, outcome.delivered) == (RunStatus.COMPLETED, True)


async def test_shutdown_with_a_failing_turn_still_closes_the_store(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        engine = await Engine.start(home, engine_config(server.base_url), clock=ManualClock(), listen=False)
        delivered: list[Outbound] = []

        async def record(outbound: Outbound) -> None:
            delivered.append(outbound)

        engine.delivery.register("console", record)
        await engine.submit(CHAT, "waiting for its debounce when the engine stops")
        break_prompt(home)
        await engine.shutdown(timeout_seconds=60)  # the drain flushes the debounce: the turn fails
        assert [o.kind for o in delivered] == ["error"]
        with pytest.raises(StorageError, match="closed"):
            await engine.store.segments.chats()  # the store itself is closed: no API above it would say


async def test_a_reply_over_the_frame_limit_reaches_the_gateway_in_parts() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            clock = ManualClock()
            engine = await Engine.start(home, engine_config(server.base_url), clock=clock)
            try:
                gateway = await GatewayClient.connect(home.socket_path)
                await gateway.send(HelloFrame(channels=["web"]))
                long_reply = "".join(f"paragraph {n}: " + "words " * 200 + "\n\n" for n in range(1500))
                assert len(long_reply.encode()) > MAX_FRAME_BYTES
                server.reply_text(long_reply)
                await gateway.send(InboundFrame(id="m-1", channel="web", chat_id="u1", text="print the book"))
                assert await gateway.recv() == AckFrame(id="m-1")
                await clock.advance(engine.config.processing.debounce_ms / 1000)
                parts: list[str] = []
                while sum(len(p) for p in parts) < len(long_reply):
                    frame = await gateway.recv()
                    assert isinstance(frame, OutboundFrame)
                    assert (frame.reply_to, frame.kind) == ("m-1", "reply")
                    parts.append(frame.text)
                assert len(parts) >= 2
                assert "".join(parts) == long_reply
                await gateway.aclose()
            finally:
                await engine.shutdown(timeout_seconds=5)
