"""A program's mistakes with the library get klaw's own errors (`except klaw.KlawError`), each naming what
is wrong and the fix: a function in `tools=` that cannot be a tool (no docstring, no type hints, `*args`,
a generator, a name a built-in tool has, something that is no function at all) raises
`ToolDefinitionError` when the engine starts, and `ask` with a chat that is no name or a text that is no
str raises `InvalidChat` / `MessageRefused` before anything is stored. Before, these were a plain
ValueError, `AttributeError: 'str' object has no attribute '__name__'` and `TypeError:
quote_from_bytes() expected bytes`. library.md's error table names every error `klaw` exports."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import klaw
from klaw import FunctionModel, InvalidChat, Klaw, KlawError, ManualClock, MessageRefused, ToolDefinitionError
from tests.test_library import CONFIG

ROOT = Path(__file__).resolve().parents[1]


def yielding_tool(x: int) -> Iterator[str]:
    """A generator."""
    yield str(x)


async def no_docstring(x: int) -> str:
    return str(x)


async def current_time() -> str:
    """The same name as the clock group's tool."""
    return "mine"


async def untyped(x):  # type: ignore[no-untyped-def]
    """No type hints."""
    return x


async def star_args(*args: int) -> str:
    """Takes *args."""
    return "w"


BAD_TOOLS: list[tuple[Any, str]] = [
    (yielding_tool, r"tool 'yielding_tool' yields its results: a tool returns one result; write `return`"),
    (no_docstring, r"tool 'no_docstring' needs a description: give it a docstring"),
    (current_time, r"a tool named 'current_time' is already offered .*: rename one of them"),
    (untyped, r"tool 'untyped': parameter 'x' needs a type hint \(e\.g\. `x: str`\)"),
    (star_args, r"parameter 'args' must be a named parameter .*\*args"),
    ("notafunction", r"a tool must be a function \(async def or def\) .*not str \(pass the function itself"),
]


@pytest.mark.parametrize(("tool", "words"), BAD_TOOLS)
async def test_a_function_that_cannot_be_a_tool_is_a_klaw_error_naming_the_fix(
    tmp_path: Path, tool: Any, words: str
) -> None:
    config = {**CONFIG, "tools": {"enabled": ["clock"]}}
    with pytest.raises(ToolDefinitionError, match=words) as raised:
        async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda m, i: "hi"), tools=[tool]):
            pass
    assert isinstance(raised.value, KlawError) and isinstance(raised.value, ValueError)
    async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda m, i: "hi")) as agent:
        assert await agent.ask("ana", "hello") == "hi"  # the failed start left the home usable


async def test_a_chat_or_text_of_the_wrong_type_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    model = FunctionModel(lambda m, i: "hi")
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, clock=ManualClock()) as agent:
        with pytest.raises(InvalidChat, match=r"a name \(a str such as 'alice'\) or a klaw.ChatRef, not int"):
            await agent.ask(123, "hello")  # type: ignore[arg-type]
        with pytest.raises(InvalidChat, match="the chat id is empty; pass a short name"):
            await agent.ask("", "hello")
        with pytest.raises(InvalidChat, match="not int"):
            await agent.history(7)  # type: ignore[arg-type]
        with pytest.raises(MessageRefused, match=r"the message must be text \(a str\), not int"):
            await agent.ask("ana", 123)  # type: ignore[arg-type]
        assert await agent.history("ana") == []


def test_library_md_names_every_error_klaw_exports() -> None:
    exported = {name: getattr(klaw, name) for name in klaw.__all__}
    errors = {name for name, value in exported.items() if isinstance(value, type) and issubclass(value, KlawError)}
    row = next(line for line in (ROOT / "docs/library.md").read_text().splitlines() if line.startswith("| errors |"))
    named = set(re.findall(r"`(\w+)`", row))
    assert errors - named == set()
    assert {"StorageError", "StorageUnavailable", "ToolDefinitionError", "InvalidChat"} <= errors


async def test_an_agent_used_before_start_or_after_close_says_which_and_how_to_open_it(tmp_path: Path) -> None:
    """Before, both were a plain RuntimeError saying "not started" and `await klaw.start()` (the module's
    name): after `aclose` too."""
    model = FunctionModel(lambda messages, info: "ok")
    agent = Klaw(tmp_path / "home", config=CONFIG, model=model, clock=ManualClock())
    with pytest.raises(klaw.EngineNotOpen) as before:
        await agent.ask("ana", "hello")
    assert str(before.value) == (
        "the engine is not started: open it with `async with Klaw(home) as agent:` or `await agent.start()`"
        " before using it"
    )
    async with agent:
        assert await agent.ask("ana", "hello") == "ok"
    with pytest.raises(KlawError, match=r"^the engine is closed \(by `await agent.aclose\(\)` or the end of its"):
        await agent.history("ana")
    await agent.start()  # what the message offers works: the same agent, opened again
    assert [entry.text for entry in await agent.history("ana")] == ["hello", "ok"]
    await agent.aclose()
    assert isinstance(before.value, RuntimeError)  # what `except RuntimeError` caught before still catches it


async def test_a_chat_name_with_a_colon_is_channel_and_chat_id_as_the_cli_reads_it(tmp_path: Path) -> None:
    """Decision 292: before, `ask("web:main", ...)` quietly wrote to a chat `library:web:main`, not the web
    page's chat `klaw tools --chat web:main` names."""
    model = FunctionModel(lambda messages, info: f"re: {messages[-1].content}")
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, clock=ManualClock()) as agent:
        assert await agent.ask("web:main", "hi web") == "re: hi web"
        assert [entry.text for entry in await agent.history(klaw.ChatRef("web", "main"))] == ["hi web", "re: hi web"]
        assert await agent.ask("library:alice", "hi alice") == "re: hi alice"  # the same chat as "alice"
        assert [entry.text for entry in await agent.history("alice")] == ["hi alice", "re: hi alice"]
        with pytest.raises(InvalidChat, match=r"write it as channel:chat_id, e\.g\. console:alice.*e\.g\. 'alice'"):
            await agent.ask("web:", "hi")
        with pytest.raises(InvalidChat, match=r"channel name 'Web Page' is invalid: use 1-32 lowercase letters"):
            await agent.ask("Web Page:main", "hi")
        with pytest.raises(InvalidChat, match="control, line-break or invalid characters"):
            await agent.ask("web:a\nb", "hi")
        assert await agent.sessions(klaw.ChatRef("library", "web:main")) == []  # nothing went there
