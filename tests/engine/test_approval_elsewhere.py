"""An approval question is answered from another of the owner's own chats, never from one that may be another
person's (decision 525, item 2).

newcomer23: `approve? [y/N]` open in `klaw chat`, `/approve 209e` on the web page was told "No approval request
'209e' is waiting in this chat". The console and the web page are both the owner's: one answers for the other.
An allow-listed Telegram chat may be someone else: it cannot answer the owner's question, and the owner's page
cannot answer one asked in Telegram, but is told where it waits. Through the engine's socket, one gateway
serving the three channels, as `klaw serve` with an attached `klaw chat` and Telegram does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.engine.frames import HelloFrame, InboundFrame
from klaw.store.records import ChatRef
from tests.engine.test_tool_approval import COMMAND, Stand, stand

CONSOLE = ChatRef("console", "root")
WEB = ChatRef("web", "main")
TELEGRAM = ChatRef("telegram", "42")


async def say(s: Stand, chat: ChatRef, text: str) -> str:
    """A message in `chat` through the gateway, acknowledged; the next outbound frame's text."""
    s.sent += 1
    frame_id = f"x{s.sent}"
    await s.gateway.send(InboundFrame(id=frame_id, channel=chat.channel, chat_id=chat.chat_id, text=text))
    await s.acked(frame_id)
    return (await s.outbound()).text


async def asked_in(s: Stand, chat: ChatRef) -> str:
    """The model calls host_exec in `chat`: the question's id, once it waits."""
    s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
    s.server.reply_text(f"Done in {chat}.")
    s.sent += 1
    frame_id = f"x{s.sent}"
    await s.gateway.send(InboundFrame(id=frame_id, channel=chat.channel, chat_id=chat.chat_id, text="clean up"))
    await s.acked(frame_id)
    await s.clock.advance(s.engine.config.processing.debounce_ms / 1000)
    request_id, frame = await s.question()
    assert frame.chat_id == chat.chat_id and frame.channel == chat.channel
    return request_id


async def test_the_web_page_answers_a_question_the_console_asked(tmp_path: Path) -> None:
    async with stand() as s:
        await s.gateway.send(HelloFrame(channels=["web", "console", "telegram"]))
        request_id = await asked_in(s, CONSOLE)
        # Telegram may be another person: not answered, and not told where it waits.
        said = await say(s, TELEGRAM, f"/approve {request_id}")
        assert (
            said == f"No approval request '{request_id}' is waiting in this chat (answered, timed out, or never asked)."
        )
        assert s.ran == []
        # A bare /approve on the page names the console's question, which an id there answers.
        said = await say(s, WEB, "/approve")
        assert said == (
            f"No approval request is waiting in this chat; {request_id} (host_exec) waits in console:root."
            f" Answer /approve ID here or there."
        )
        prompt = asyncio.ensure_future(s.engine.approvals.ended(request_id))  # what an in-process console awaits
        said = await say(s, WEB, f"/approve {request_id}")
        assert said == "Approved (asked in console:root): host_exec runs now."
        assert await prompt == f"Answered in web:main, not at this prompt: /approve {request_id}, so host_exec runs."
        reply = await s.outbound()
        assert (reply.channel, reply.chat_id, reply.text) == ("console", "root", "Done in console:root.")
        assert s.ran == [COMMAND]
        # The console's prompt, had it been up, is told where it was answered (the attached one: approval_over).
        assert s.engine.approvals.over(CONSOLE, request_id) == (
            f"Answered elsewhere, not at this prompt: /approve {request_id}, so host_exec runs."
        )


async def test_a_question_asked_in_telegram_is_answered_there_and_the_page_is_told_where_it_waits(
    tmp_path: Path,
) -> None:
    async with stand() as s:
        await s.gateway.send(HelloFrame(channels=["web", "console", "telegram"]))
        request_id = await asked_in(s, TELEGRAM)
        said = await say(s, WEB, f"/deny {request_id}")
        assert said == (
            f"Not answered: {request_id} (host_exec) waits in telegram:42, which may be another person's chat:"
            " answer it there."
        )
        assert s.engine.approvals.waiting(TELEGRAM) == [request_id]
        said = await say(s, TELEGRAM, f"/deny {request_id}")
        assert said == "Denied: host_exec will not run."
        assert (await s.outbound()).text == "Done in telegram:42."
        assert s.ran == []
