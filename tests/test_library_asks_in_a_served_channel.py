"""A listening library engine asks in a chat a gateway serves (`agent.ask("web:main", …)`, as docs/library.md
shows): the program gets the reply to its own message, and the page keeps its own replies and their live
pieces. Before, the first such `ask` made the program the whole channel's in-process sink, never undone:
the page's next message got no reply (it went to `on_message`) and no pieces (adversary26 H1; decision 465)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, AgentMessage, ChatMessage, FunctionModel, Klaw
from klaw.engine.frames import DeltaFrame, EngineFrame, GatewayFrame, HelloFrame, InboundFrame, OutboundFrame
from tests.engine import GatewayClient

CONFIG = {
    "embedder": {"backend": "fake", "dim": 32},
    "summarizer": {"enabled": False},
    "processing": {"debounceMs": 0},
}


@pytest.fixture
def short_home() -> Iterator[Path]:
    """engine.sock's path must stay under ~107 bytes: the home lives under a short /tmp path."""
    root = Path(tempfile.mkdtemp(prefix="klaw-", dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def whole(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return f"reply to: {messages[-1].content}"


async def writing(messages: Sequence[ChatMessage], info: AgentInfo) -> AsyncIterator[str]:
    yield "reply to: "
    yield str(messages[-1].content)


async def test_an_ask_in_a_served_chat_takes_its_own_reply_and_leaves_the_page_its_own(short_home: Path) -> None:
    told: list[AgentMessage] = []

    async def on_message(message: AgentMessage) -> None:
        told.append(message)

    model = FunctionModel(whole, stream_function=writing)
    async with Klaw(short_home, config=CONFIG, model=model, listen=True, on_message=on_message) as agent:
        page = await GatewayClient.connect(short_home / "engine.sock")
        try:
            await page.send(HelloFrame(channels=["web", "console"], streaming=["web"]))
            await page.roundtrip("served")

            stream = agent.stream("web:main", "from the program")
            assert "".join([piece async for piece in stream]) == "reply to: from the program"
            assert await agent.ask("console:someone-else", "also from the program") == (
                "reply to: also from the program"
            )
            # the program's pieces are the program's; its reply in web:main reached the page too (shown there
            # at once, with the message it answers read from the history: decision 473), the console's did not
            sent = [f for f in await page.roundtrip("asked") if isinstance(f, OutboundFrame | DeltaFrame)]
            assert [(type(f), f.chat_id, f.text) for f in sent] == [
                (OutboundFrame, "main", "reply to: from the program")
            ], sent
            assert isinstance(sent[0], OutboundFrame) and sent[0].channel == "web" and sent[0].kind == "reply"
            assert sent[0].reply_to is not None
            history = await agent.history("web:main")
            assert [(entry.role, entry.text) for entry in history][-2:] == [
                ("user", "from the program"),
                ("assistant", "reply to: from the program"),
            ]
            assert history[-2].id == sent[0].reply_to

            for channel in ("web", "console"):
                await page.send(InboundFrame(id=f"m-{channel}", channel=channel, chat_id="main", text="from the page"))
                frames = await _until_reply(page, f"m-{channel}")
                reply = frames[-1]
                assert isinstance(reply, OutboundFrame) and reply.text == "reply to: from the page", frames
                pieces = [f.text for f in frames if isinstance(f, DeltaFrame)]
                assert "".join(pieces) == ("reply to: from the page" if channel == "web" else ""), frames
            assert told == []  # nothing of the page's went to the program
        finally:
            await page.aclose()


async def _until_reply(page: GatewayClient, message_id: str) -> list[GatewayFrame | EngineFrame]:
    """The frames up to the reply to `message_id` (the old code never sent it: failed within 15 s)."""
    frames: list[GatewayFrame | EngineFrame] = []
    async with asyncio.timeout(15):
        while not (isinstance(frame := await page.recv(), OutboundFrame) and frame.reply_to == message_id):
            frames.append(frame)
    return [*frames, frame]
