"""A pipe beside an attached terminal on an engine started before an upgrade (decision 535, item 1).

Decision 527's pipe beside a terminal gets its reply as a copy (`hello`'s `watching`). An engine started before
then ignores the field (an unknown field is ignored by design), so `echo hi | klaw chat` waited for ever; the
message went into the chat and the terminal showed its reply. The engine now says its protocol version in the
pong that answers the hello, and the pipe, finding an older engine, says so and sends nothing.

The older engine is this `klaw serve` with what it lacked taken away (the `watching` field dropped from each
hello, the pong without a version), run as a person runs it; the terminal is a real `klaw chat` in tmux.
"""

from __future__ import annotations

from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, terminal
from tests.cli.piped_chat import piped
from tests.cli.test_chat_attached import CHAT, folded
from tests.serve_helpers import running, web_page

OLDER_SERVE = """
import sys
import klaw.engine.frame_dispatch as dispatch
import klaw.engine.outbound_routes as routes

dispatch.PROTOCOL = None  # its pongs said no version
hello = routes.OutboundRoutes.hello

async def without_watching(self, conn, frame):  # it knew no `watching`
    await hello(self, conn, frame.model_copy(update={"watching": []}))

routes.OutboundRoutes.hello = without_watching
sys.argv = ["klaw", "serve"]
from klaw.cli import main
main()
"""


@needs_tmux
async def test_a_pipe_beside_a_terminal_on_an_older_engine_says_restart_it_and_sends_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running("-c", OLDER_SERVE, env=env, stderr=None) as serve:
            await web_page(serve)
            (tmp_path / "term").mkdir()
            async with terminal(CHAT, env, tmp_path / "term") as term:
                await term.wait_for(lambda s: "attached to the running engine" in s, "the banner")
                code, out, err = await piped(env, "hello from cron")  # waited for ever: the 120 s bound fails it
                said = folded(err)
                assert (code, out) == (1, ""), said
                assert "error: the running engine is older than this klaw: restart it with `klaw serve` (" in said
                assert "Nothing was sent." in said and "Traceback" not in said, said
                model.reply_text("the terminal's own")  # nothing of the pipe reached the chat: the model was not asked
                await term.type_line("still here")
                await term.wait_for_prompt_after("the terminal's own", "the terminal's reply")
                assert len(model.chat_requests) == 1
                await term.type_line("/exit")
                assert await term.exit_status() == 0
