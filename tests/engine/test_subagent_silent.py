"""Silent logic (SubagentSilentLogicTest, docs/decisions/004-silent-replies.md): a subagent's
`{"silent": true}` is not delivered; anything else reaches the gateway over the engine's real socket, as
the task's chat expects it."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.runtime import Engine
from klaw.engine.silent import is_silent
from klaw.engine.subagents import RunOutcome, RunStatus, SubagentRequest
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.engine.harness import engine_config

WEB = ChatRef("web", "u1")
FOLLOW_UP = "second run: delivered"


@dataclass
class Gateway:
    engine: Engine
    server: FakeOpenAiServer
    reader: asyncio.StreamReader

    async def run(self, reply: str, task: str = "digest") -> RunOutcome:
        """One subagent run whose model answers `reply`, reporting to the gateway's chat."""
        self.server.reply_text(reply)
        scheduler = self.engine.scheduler
        assert scheduler is not None
        return await scheduler.runner.spawn(SubagentRequest(task, "report", inject_into=WEB))

    async def next_outbound(self) -> dict[str, Any]:
        async with asyncio.timeout(10):
            frame = json.loads(await self.reader.readline())
        assert frame["type"] == "outbound"
        return dict(frame)

    async def injected(self) -> list[str]:
        return [m.text for m in await self.engine.chats.history(WEB, limit=50)]


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    root = Path(tempfile.mkdtemp(prefix="klaw-", dir="/tmp"))  # AF_UNIX paths are short
    home = KlawHome(root)
    initialise_home(home)
    try:
        async with FakeOpenAiServer() as server:
            engine = await Engine.start(home, engine_config(server.base_url), clock=ManualClock())
            try:
                reader, writer = await asyncio.open_unix_connection(str(home.socket_path))
                writer.write(b'{"type": "hello", "channels": ["web"]}\n')
                await writer.drain()
                yield Gateway(engine, server, reader)
                writer.close()
            finally:
                await engine.shutdown(timeout_seconds=5)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_response_with_silent_true_not_sent_to_gateway(gateway: Gateway) -> None:
    outcome = await gateway.run('{"silent": true}')
    assert (outcome.status, outcome.delivered) == (RunStatus.SILENT, False)
    await gateway.run(FOLLOW_UP)
    assert (await gateway.next_outbound())["text"] == FOLLOW_UP  # nothing came before it
    assert await gateway.injected() == [FOLLOW_UP]


async def test_response_without_silent_field_sent_to_gateway(gateway: Gateway) -> None:
    outcome = await gateway.run('{"summary": "two new mails"}')
    assert (outcome.status, outcome.delivered) == (RunStatus.COMPLETED, True)
    frame = await gateway.next_outbound()
    assert (frame["channel"], frame["chat_id"], frame["text"], frame["kind"]) == (
        "web",
        "u1",
        '{"summary": "two new mails"}',
        "reply",
    )


async def test_response_with_silent_false_sent_to_gateway(gateway: Gateway) -> None:
    outcome = await gateway.run('{"silent": false, "text": "rain at five"}')
    assert outcome.delivered
    assert (await gateway.next_outbound())["text"] == '{"silent": false, "text": "rain at five"}'


async def test_non_json_response_treated_as_not_silent(gateway: Gateway) -> None:
    outcome = await gateway.run("Nothing new today, but the server restarted twice.")
    assert outcome.delivered
    assert (await gateway.next_outbound())["text"] == "Nothing new today, but the server restarted twice."


async def test_parse_failure_treated_as_not_silent(gateway: Gateway) -> None:
    outcome = await gateway.run('{"silent": true')  # cut off: not JSON, so the safe default applies
    assert outcome.delivered
    assert (await gateway.next_outbound())["text"] == '{"silent": true'


@pytest.mark.parametrize(
    ("reply", "silent"),
    [
        ('{"silent": true}', True),
        ('  {"silent":true, "reason": "nothing new"}\n', True),
        ('{"silent": false}', False),
        ('{"silent": "true"}', False),
        ('{"silent": 1}', False),
        ('[{"silent": true}]', False),
        ("true", False),
        ("", False),
        ("silent", False),
        ('```json\n{"silent": true}\n```', False),
        ('{"silent": true} and more', False),
    ],
)
def test_only_a_json_object_with_silent_true_is_silent(reply: str, silent: bool) -> None:
    assert is_silent(reply) is silent
