"""A reply to a message this terminal did not send is labelled by where that message came from (decision 535, item 2).

Decision 527 labelled every live reply to a message the attached terminal had not sent "Reply to a message piped
in beside this terminal": also the reply to a message an earlier terminal sent, still being answered when this one
attached. The engine now notes where each message came from (the connection's hello: a pipe, a pipe beside a
terminal, a terminal, the web page; a message a restart answers again) and the reply frame carries it.

`klaw serve` as a person runs it, two `klaw chat` terminals in tmux one after the other, the fake model's answer to
the first terminal's message held until the second has attached.
"""

from __future__ import annotations

import asyncio
import fcntl
import signal
from pathlib import Path

from klaw.engine.frames import AckFrame, HelloFrame, InboundFrame, OutboundFrame, origin_label
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, poll_until, terminal
from tests.cli.test_chat_attached import CHAT
from tests.engine import GatewayClient
from tests.serve_helpers import running, web_page

EARLIER = "Reply to a message sent from an earlier `klaw chat` terminal:"


async def _lock_free(lock: Path) -> bool | None:
    """True once no `klaw chat` holds the terminal's lock (the first terminal's process has ended)."""
    with lock.open("rb") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        fcntl.flock(held, fcntl.LOCK_UN)
    return True


@needs_tmux
async def test_a_reply_to_an_earlier_terminals_message_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    release = asyncio.Event()
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_text("answer to the first terminal", before=release.wait)
            (tmp_path / "first").mkdir()
            async with terminal(CHAT, env, tmp_path / "first") as first:
                await first.wait_for(lambda s: "attached to the running engine" in s, "the banner")
                await first.type_line("a slow question")

                async def asked() -> bool | None:
                    return True if model.chat_requests else None

                async def not_asked() -> str:
                    return f"the model was not asked: {await first.screen()}"

                await poll_until(asked, not_asked)
            # The first terminal is gone (its tmux server killed); its message's turn goes on in the engine.
            lock = home / "gateway" / "terminal" / "attached.lock"

            async def still_held() -> str:
                return f"{lock} is still held"

            await poll_until(lambda: _lock_free(lock), still_held)
            (tmp_path / "second").mkdir()
            async with terminal(CHAT, env, tmp_path / "second") as second:
                await second.wait_for(lambda s: "attached to the running engine" in s, "the banner")
                release.set()
                screen = await second.wait_for_prompt_after("answer to the first terminal", "the earlier reply")
                assert EARLIER in screen, screen
                assert screen.index(EARLIER) < screen.index("answer to the first terminal")
                assert "piped in beside this terminal" not in screen, screen  # what it said before
                await second.type_line("/exit")
                assert await second.exit_status() == 0


async def test_a_reply_to_a_message_a_restart_answers_again_says_it_came_from_before(tmp_path: Path) -> None:
    """The engine killed while its turn waited for the model; the next start answers the message again and its
    reply's frame says where the message came from (`restart`), which a terminal words as such."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_hang()
            console = await GatewayClient.connect(home / "engine.sock")
            await console.send(HelloFrame(channels=["console"]))
            await console.roundtrip()
            await console.send(InboundFrame(id="m1", channel="console", chat_id="me", text="before the crash"))
            assert isinstance(await console.recv(), AckFrame)

            async def asked() -> bool | None:
                return True if model.chat_requests else None

            async def not_asked() -> str:
                return "the model was not asked"

            await poll_until(asked, not_asked)
            serve.send_signal(signal.SIGKILL)
            await serve.wait()
            await console.aclose()
        model.reply_text("answered again")
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            console = await GatewayClient.connect(home / "engine.sock")
            await console.send(HelloFrame(channels=["console"]))
            while not isinstance(reply := await console.recv(), OutboundFrame) or reply.reply_to != "m1":
                pass
            assert (reply.text, reply.origin) == ("answered again", "restart")
            assert origin_label(reply.origin) == "Reply to a message sent before klaw last restarted (answered again):"
            await console.aclose()
