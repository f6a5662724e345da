"""Arguments `Klaw` does not take, refused at once in words (`InvalidArgument`, a `TypeError`): before,
`Klaw(home, model="gpt-4o")` started, every `ask` failed as "something went wrong" and `aclose` raised
AttributeError; `Klaw(123)` raised a bare TypeError; `search_memory("alice", None)` an AttributeError."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, InvalidArgument, Klaw, KlawError
from tests.test_library import CONFIG


def _echo(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return messages[-1].content or ""


def test_a_model_name_as_model_is_refused_naming_routing_default(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"model= takes a model object.*not a model name \('gpt-4o'\)") as raised:
        Klaw(tmp_path / "home", config=CONFIG, model="gpt-4o")  # type: ignore[arg-type]
    assert "routing.default" in str(raised.value) and isinstance(raised.value, (KlawError, TypeError))
    with pytest.raises(InvalidArgument, match=r"the int given has no `complete`, `stream`, `aclose`, `model_id`"):
        Klaw(tmp_path / "home", config=CONFIG, model=7)  # type: ignore[arg-type]
    assert not (tmp_path / "home").exists()  # refused before anything was created


def test_a_home_that_is_no_path_is_refused_in_words() -> None:
    with pytest.raises(InvalidArgument, match=r"the home must be a directory \(a str or pathlib.Path.*not int"):
        Klaw(123)  # type: ignore[arg-type]


async def test_a_search_query_that_is_no_text_is_refused_and_the_agent_goes_on(tmp_path: Path) -> None:
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(_echo)) as agent:
        with pytest.raises(InvalidArgument, match=r"the query must be text \(a str\).*not NoneType"):
            await agent.search_memory("alice", None)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match=r"not bytes"):
            await agent.saved_memories("alice", b"garden")  # type: ignore[arg-type]
        assert await agent.search_memory("alice", "garden") == []
