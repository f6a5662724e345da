"""What newcomer22 met in the library and the scheduler (decision 513): a task taking more than half of a day's
runs (scheduler.maxRunsPerDay) was added without a word, by `klaw schedule add` and by the agent's schedule_add."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import (
    AgentInfo,
    ChatMessage,
    ChatResponse,
    EngineAlreadyRunningError,
    FunctionModel,
    Klaw,
    ManualClock,
    call_tool,
    tool_calls,
)
from klaw.channels.console import console_chat
from tests.cli.klaw_here import klaw_here
from tests.test_library import CONFIG


def test_schedule_add_warns_when_one_task_takes_most_of_a_days_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    tea = klaw_here(home, "schedule", "add", "tea", "--every", "1m", "--message", "tea?")
    said = " ".join(tea.stderr.split())
    assert tea.returncode == 0 and "Added tea" in tea.stdout, tea.stderr
    assert "this task runs 1440 times a day, 100 % of the 1440 runs" in said, said
    assert "raise scheduler.maxRunsPerDay in engine.yaml" in said
    hourly = klaw_here(home, "schedule", "add", "news", "--every", "1h", "--message", "news?")
    # 24 of 1440 alone, but with tea's 1440 all tasks run past the cap: said (decision 526)
    assert hourly.returncode == 0 and "together 1464 times a day, 102 %" in " ".join(hourly.stderr.split())
    raised = klaw_here(
        home,
        "schedule",
        "add",
        "often",
        "--every",
        "2m",
        "--message",
        "x",
        env={"KLAW__SCHEDULER__MAXRUNSPERDAY": "1000"},
    )
    assert (
        "this task runs 720 times a day and the other 2 tasks 1024: together 1744 times a day, 174 % of the 1000"
        in (" ".join(raised.stderr.split()))
    )  # tea's 1440 counted as the cap, 1000, with news's 24 (decision 526)


def _adds_every_minute(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    if messages[-1].role == "tool":
        return f"the tool said: {messages[-1].content}"
    return tool_calls(call_tool("schedule_add", {"name": "tea", "every": "1m", "message": "tea?"}))


async def test_the_agents_schedule_add_answer_carries_the_warning(tmp_path: Path) -> None:
    model = FunctionModel(_adds_every_minute)
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, clock=ManualClock()) as agent:
        reply = await agent.ask("alice", "tea every minute please")
    assert "this task runs 1440 times a day, 100 % of the 1440 runs" in reply, reply
    assert "(tell the person)" in reply


async def test_a_notebook_cell_started_twice_gets_its_first_klaw_back(tmp_path: Path) -> None:
    """`agent = Klaw(h); await agent.start()` run twice: the refusal said "close it first", but the variable holding
    the first Klaw was overwritten. The error carries it (`err.open`), and `Klaw.opened(home)` finds it."""
    home = tmp_path / "home"
    echo = FunctionModel(lambda messages, info: "echo: " + (messages[-1].content or ""))
    first = Klaw(home, config=CONFIG, model=echo, clock=ManualClock())
    await first.start()
    second = Klaw(home, config=CONFIG, model=echo, clock=ManualClock())
    with pytest.raises(EngineAlreadyRunningError) as refused:
        await second.start()
    said = str(refused.value)
    assert f"this program already has Klaw({str(home)!r}) open" in said, said
    assert f"`await Klaw.opened({str(home)!r}).aclose()`" in said and "`err.open`" in said
    assert refused.value.open is first and Klaw.opened(str(home)) is first
    assert await refused.value.open.ask("alice", "still here?") == "echo: still here?"
    opened = Klaw.opened(home)
    assert opened is not None
    await opened.aclose()
    assert Klaw.opened(home) is None  # closed: forgotten, and the home is free for the second
    await second.start()
    try:
        assert Klaw.opened(home) is second
        assert await second.ask("alice", "and now?") == "echo: and now?"
    finally:
        await second.aclose()
    assert Klaw.opened(home) is None


async def test_memory_search_without_chat_says_which_chat_it_read_and_which_others_hold_the_words(
    tmp_path: Path,
) -> None:
    """A person living in the web page searched the console chat by default, saw only unrelated hits and took
    memory for lost: the output names the chat searched and the chats that hold the words."""
    home = tmp_path / "home"
    echo = FunctionModel(lambda messages, info: "noted")
    config = {**CONFIG, "processing": {"debounceMs": 0}}
    async with Klaw(home, config=config, model=echo, clock=ManualClock()) as agent:
        await agent.ask(str(console_chat()), "the weather is grey today")
        await agent.ask("web:main", "we saw a quokka on Rottnest island")
        await agent.ask("telegram:42", "a quokka again, smiling")
        await agent.ask("library:notes", "nothing about animals here")
    found = await asyncio.to_thread(klaw_here, home, "memory", "search", "quokka")
    said = " ".join(found.stdout.split())
    assert found.returncode == 0, found.stderr
    assert f"Searched {console_chat()}, the default chat; --chat channel:chat_id searches another." in said, said
    assert "These chats hold these words too:" in said
    others = said.split("These chats hold these words too:")[1]
    assert "web:main" in others and "telegram:42" in others and "library:notes" not in others
    named = await asyncio.to_thread(klaw_here, home, "memory", "search", "quokka", "--chat", "web:main")
    assert "Searched" not in named.stdout and "quokka" in named.stdout  # a chat named: nothing more to say
    nowhere = await asyncio.to_thread(klaw_here, home, "memory", "search", "wombat")
    assert "No other chat holds these words." in " ".join(nowhere.stdout.split()), nowhere.stdout
