"""`klaw chat` in a real terminal: a subagent's answer, and a message the agent wrote in another chat,
appear while the person sits at the prompt, each headed with where it came from."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.engine.frames import HelloFrame, InboundFrame, OutboundFrame
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import PROMPT, USER, chat_env, greeted_chat, init_home, needs_tmux
from tests.engine import GatewayClient


@needs_tmux
async def test_a_subagent_answer_is_shown_at_the_prompt_without_typing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        # One LLM slot: the turn keeps it to the end, so the run's request is the third one.
        env = {**chat_env(home, model.base_url), "KLAW__PROCESSING__MAXCONCURRENTLLM": "1"}
        model.reply_tool_calls([("subagent_spawn", {"task_name": "research", "message": "find sources"})])
        model.reply_text("Started it in the background.")
        gate = asyncio.Event()
        model.reply_text("Here are three sources.", before=gate.wait)
        async with greeted_chat(env, tmp_path) as term:
            await term.type_line("research this for me")
            await term.wait_for_prompt_after("Started it in the background.", "the turn's reply")
            gate.set()
            # Printed above the prompt, which comes back below it, ready to type. Drawing it there is
            # two writes (the prompt erased and the answer written, then the prompt drawn again): on a
            # loaded machine a screen read between them shows the answer without the prompt yet, so
            # the wait is for both, as for the turn's reply above.
            screen = await term.wait_for_prompt_after("Here are three sources.", "the subagent's answer")
            assert screen.rstrip().endswith(PROMPT.rstrip())
            assert "Subagent: research\nHere are three sources." in screen  # whose answer it is
            # A spawned run keeps its own log, never a scheduled task's of the same name (decision 217).
            assert (home / "conversations" / "scheduler_spawn%3Aresearch").is_dir()
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0


@needs_tmux
async def test_a_message_the_agent_wrote_in_another_chat_says_where_it_came_from(tmp_path: Path) -> None:
    """fh9: a message `message_send` brought from the web page's chat showed bare ("hello console from
    web"), as if it answered the person's last line; now it is headed with its chat, as a task's answer is."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        model.reply_tool_calls([("message_send", {"target": f"console:{USER}", "text": "hello console from web"})])
        model.reply_text("Sent it to your terminal.")
        async with greeted_chat(env, tmp_path) as term:
            web = await GatewayClient.connect(KlawHome(home).socket_path)  # the web page's gateway
            try:
                await web.send(HelloFrame(channels=["web"]))
                await web.roundtrip()
                await web.send(InboundFrame(id="w1", channel="web", chat_id="main", text="say hello on the console"))
                while not (isinstance(frame := await web.recv(), OutboundFrame) and frame.reply_to == "w1"):
                    pass
                assert frame.text == "Sent it to your terminal."
            finally:
                await web.aclose()
            screen = await term.wait_for_prompt_after("hello console from web", "the message from the web chat")
            assert "From web:main\nhello console from web" in screen, screen
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
