"""What newcomer21 met in the library and the scheduler (decision 501): a tool returning None gave the model
`null`; `agent.ask("telegram:abc", …)` was accepted though Telegram chats are numbers; "Alice" and "alice"
are two chats, as documented; a task injecting into a Telegram chat nothing serves said nothing when added
or run."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import (
    AgentInfo,
    ChatMessage,
    ChatResponse,
    FunctionModel,
    InvalidChat,
    Klaw,
    ManualClock,
    call_tool,
    tool_calls,
)
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.scheduling.schedules import TaskSchedule
from klaw.store.records import ChatRef
from tests.cli.klaw_here import klaw_here
from tests.engine.harness import engine_config
from tests.engine.test_scheduler_e2e import engine_on, run_once
from tests.test_library import CONFIG

REPO = Path(__file__).resolve().parents[1]
saved: list[str] = []


async def remember(note: str) -> None:
    """Keep a note.

    Args:
        note: what to keep
    """
    saved.append(note)


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    if messages[-1].role == "tool":
        return f"the tool said: {messages[-1].content}"
    return tool_calls(call_tool("remember", {"note": "milk"}))


async def test_a_tool_returning_none_is_read_as_finished_with_nothing_to_say(tmp_path: Path) -> None:
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), tools=[remember]) as agent:
        reply = await agent.ask("alice", "remember milk")
    assert saved == ["milk"]
    assert reply == "the tool said: (the tool finished and returned nothing)"


async def test_a_telegram_chat_is_a_number_and_names_are_compared_exactly(tmp_path: Path) -> None:
    echo = FunctionModel(lambda messages, info: " | ".join(m.content or "" for m in messages if m.role == "user"))
    async with Klaw(tmp_path / "home", config=CONFIG, model=echo, clock=ManualClock()) as agent:
        with pytest.raises(InvalidChat, match=r"a Telegram chat's id is its number \(e\.g\. telegram:123456789"):
            await agent.ask("telegram:abc", "hi")
        assert await agent.ask("telegram:123456", "hi") == "hi"
        assert await agent.ask("telegram:-1001234", "hi group") == "hi group"
        # Case is kept (decision 501): a channel's ids are case-sensitive, and folding would merge chats
        # that exist as two; docs/library.md says so.
        assert await agent.ask("Alice", "one") == "one"
        assert await agent.ask("alice", "two") == "two"
    assert "'Alice' and 'alice' are two chats" in (REPO / "docs" / "library.md").read_text(encoding="utf-8")


def test_schedule_add_into_a_telegram_chat_nothing_serves_warns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    args = ("schedule", "add", "tg", "--every", "1h", "--message", "hi", "--new-chat", "--inject-into")
    refused = klaw_here(home, *args, "telegram:abc")
    assert refused.returncode == 2 and "a Telegram chat's id is its number" in refused.stderr, refused.stderr
    added = klaw_here(home, *args, "telegram:123456")
    assert added.returncode == 0 and "Added tg" in added.stdout, added.stderr
    assert "warning: channels.telegram.enabled is false: nothing delivers replies to a Telegram chat" in added.stderr
    text = (home / "engine.yaml").read_text(encoding="utf-8")
    off = re.search(r"telegram:[^\n]*\n    enabled: false", text)
    assert off is not None, text
    text = text.replace(off.group(0), off.group(0).replace("enabled: false", "enabled: true"))
    text = re.sub(r"allowedChatIds: \[\]", "allowedChatIds: [42]", text, count=1)
    (home / "engine.yaml").write_text(text, encoding="utf-8")
    again = klaw_here(home, *[a.replace("tg", "tg2") for a in args], "telegram:123456")
    assert "warning: telegram:123456 is not in channels.telegram.allowedChatIds" in again.stderr, again.stderr
    served = klaw_here(home, *[a.replace("tg", "tg3") for a in args], "telegram:42")
    assert served.returncode == 0 and "warning" not in served.stderr, served.stderr


async def test_a_run_into_a_telegram_chat_nothing_serves_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"})
        async with engine_on(home, config, clock) as engine:
            assert engine.scheduler is not None
            await engine.scheduler.add_task(
                "tg", TaskSchedule.cron("* * * * *"), "hi", inject_into=ChatRef("telegram", "123456")
            )
            server.reply_text("hello tg")
            with caplog.at_level(logging.WARNING, logger="klaw.engine.scheduler_loop"):
                await run_once(engine, clock, 0)
    said = [r.getMessage() for r in caplog.records]
    assert "task tg runs, but its replies reach nobody: channels.telegram.enabled is false" in " ".join(said), said
