"""`echo … | klaw chat` beside a running `klaw serve`: all of stdin is one message, so its turn starts at once
instead of after processing.debounceMs of silence, as in process (decision 499); it waited the debounce
(1.5 s of a ~3 s run by default, decision 520). With a debounce of an hour the piped chat is still answered;
a message a terminal would send in the same chat waits for its debounce as before (a burst is still joined)."""

from __future__ import annotations

from pathlib import Path

from klaw.engine.frames import AckFrame, CommandFrame, HelloFrame, InboundFrame, OutboundFrame
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.engine import GatewayClient
from tests.serve_helpers import running, stop, web_page

AN_HOUR_MS = "3600000"


async def test_a_piped_chat_beside_serve_is_answered_without_the_debounce(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        env["KLAW__PROCESSING__DEBOUNCEMS"] = AN_HOUR_MS
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_text("answered at once")
            code, out, err = await piped(env, "hello from a pipe")
            assert (code, out) == (0, "answered at once\n"), err
            assert len(model.chat_requests) == 1
            # a gateway's message that is not marked whole (a terminal's, the web page's) still waits
            other = await GatewayClient.connect(KlawHome(home).socket_path)
            try:
                await other.send(HelloFrame(channels=["elsewhere"]))
                await other.send(InboundFrame(id="typed-1", channel="elsewhere", chat_id="c", text="a typed line"))
                assert await other.recv() == AckFrame(id="typed-1")
                await other.send(CommandFrame(id="status-1", channel="elsewhere", chat_id="c2", command="status"))
                status = await other.recv()
                while not isinstance(status, OutboundFrame):
                    status = await other.recv()
            finally:
                await other.aclose()
            assert "1 chat(s) in debounce" in status.text, status.text
            assert len(model.chat_requests) == 1
            assert await stop(serve) == 0
