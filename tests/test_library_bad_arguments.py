"""`Klaw(...)` and its methods refuse an argument of the wrong kind in words (`InvalidArgument` naming
the argument, the kind given and what it takes), before anything runs: before, `tools=fn` raised
"'function' object is not iterable", `history(limit="x")` an apsw MismatchError, `search_memory(limit="3")`
a bare TypeError, `history(limit=-1)` returned every message and `on_message=5` was accepted; `embedder=`,
`clock=` and `listen=` were taken unchecked, and `limit=10**30` reached SQLite as an OverflowError
(decision 365)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, InvalidArgument, Klaw, ManualClock
from tests.test_library import CONFIG


def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return "got it"


def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"tools": weather}, r"tools= takes a list of functions \(e\.g\. tools=\[my_tool\]\), not function: put"),
        ({"tools": 3}, r"tools= takes a list of functions \(e\.g\. tools=\[my_tool\]\), not int"),
        ({"on_message": 5}, r"on_message= takes a function .* or None, not int"),
        ({"approve": "yes"}, r"approve= takes a function .* or None, not str"),
        # accepted before, then failing where the engine first used them (decision 365)
        (
            {"embedder": "fake"},
            r"embedder= takes a klaw\.Embedder .* the str given has no `embed`, `aclose`",
        ),
        ({"embedder": object()}, r"embedder= takes .* or None for the configured one; the object given has no `embed`"),
        (
            {"clock": datetime.now},
            r"clock= takes a clock \(e\.g\. clock=klaw\.ManualClock\(\)\) .* no `now`, `sleep`",
        ),
        ({"listen": "no"}, r"listen= takes True or False, not str"),
        ({"listen": 1}, r"listen= takes True or False, not int"),
    ],
)
def test_klaw_refuses_arguments_of_the_wrong_kind(tmp_path: Path, kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidArgument, match=words):
        Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(answer), **kwargs)
    assert not (tmp_path / "home").exists()


async def test_limits_and_sessions_of_the_wrong_kind_are_refused_in_words(tmp_path: Path) -> None:
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(answer), clock=ManualClock()) as agent:
        await agent.ask("alice", "hello there")
        typed: Any = agent  # the calls a program without type checks can make
        bad: list[tuple[Any, str]] = [
            (typed.history("alice", limit="x"), r"limit= takes a whole number \(an int, e\.g\. limit=10\), not str"),
            (typed.history("alice", limit=-1), r"limit= takes a whole number of at least 1 .* not -1"),
            (typed.history("alice", limit=True), r"limit= takes a whole number .* not bool"),
            (typed.history("alice", session="1"), r"session= takes a whole number .* not str"),
            (typed.turns("alice", session=1.5), r"session= takes a whole number .* not float"),
            (typed.search_memory("alice", "hello", limit="3"), r"limit= takes a whole number .* not str"),
            (typed.saved_memories("alice", "hello", limit=0), r"limit= takes a whole number of at least 1 .* not 0"),
        ]
        for call, words in bad:
            with pytest.raises(InvalidArgument, match=words):
                await call
        assert [entry.text for entry in await agent.history("alice", limit=1)] == ["got it"]
        # "all of them": reached SQLite as an OverflowError, "int too big to convert" (decision 365)
        everything = await agent.history("alice", limit=10**30)
        assert [entry.text for entry in everything] == ["hello there", "got it"]
        assert [found.text for found in await agent.search_memory("alice", "hello", limit=10**30)][:1] == [
            "hello there"
        ]
        assert await agent.saved_memories("alice", "hello", limit=2**62) == []
        assert await agent.ask("alice", "still there?") == "got it"
