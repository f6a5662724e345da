"""What a program can get wrong with the library is raised as a documented error `klaw` exports (decision 538,
newcomer24 items 17-19): `search_memory(chat, "")` raised `ArchivalError` (not in `klaw.__all__`; the docs promise
`InvalidArgument`), `Klaw("/etc/hostname").start()` a raw `FileExistsError`, and a PostgreSQL config whose `urlEnv`
variable is unset a `StorageError` instead of `ConfigError`."""

from __future__ import annotations

from pathlib import Path

import pytest

import klaw
from klaw import ConfigError, FunctionModel, HomeUnusable, InvalidArgument, Klaw, KlawError, ManualClock
from tests.test_library import CONFIG


def answer(messages: object, info: object) -> str:
    return "ok"


async def test_an_empty_search_is_an_invalid_argument(tmp_path: Path) -> None:
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(answer), clock=ManualClock()) as agent:
        await agent.ask("alice", "the gate code is 2468")
        for query in ["", "   "]:
            with pytest.raises(InvalidArgument, match="the query is empty: say what to look for"):
                await agent.search_memory("alice", query)
            with pytest.raises(InvalidArgument, match="the query is empty"):
                await agent.saved_memories("alice", query)
        assert [hit.text for hit in await agent.search_memory("alice", "gate code")][:1] == ["the gate code is 2468"]


async def test_a_home_that_is_a_file_or_under_one_is_refused_in_words(tmp_path: Path) -> None:
    file = tmp_path / "engine.yaml"
    file.write_text("not a home\n")
    with pytest.raises(HomeUnusable) as refused:
        await Klaw(file, config=CONFIG, model=FunctionModel(answer)).start()
    assert str(refused.value) == f"{file} is a file, not a klaw home: give Klaw a folder (it is created if missing)"
    assert isinstance(refused.value, KlawError) and isinstance(refused.value, OSError)  # as the FileExistsError was
    with pytest.raises(HomeUnusable, match=f"cannot make the klaw home {file}/home: {file} is a file, not a folder"):
        await Klaw(file / "home", config=CONFIG, model=FunctionModel(answer)).start()
    assert file.read_text() == "not a home\n"
    assert Klaw.opened(file) is None


async def test_an_unset_database_variable_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KLAW_TEST_NO_SUCH_URL", raising=False)
    config = {**CONFIG, "database": {"backend": "postgres", "urlEnv": "KLAW_TEST_NO_SUCH_URL"}}
    with pytest.raises(ConfigError) as refused:
        await Klaw(tmp_path / "home", config=config, model=FunctionModel(answer)).start()
    assert str(refused.value) == (
        "the environment variable KLAW_TEST_NO_SUCH_URL (database.urlEnv) is not set: export"
        " KLAW_TEST_NO_SUCH_URL=postgresql://user:password@host:5432/klaw before starting klaw"
    )
    assert not isinstance(refused.value, klaw.StorageError)
    assert Klaw.opened(tmp_path / "home") is None


def test_the_errors_raised_here_are_exported_from_klaw() -> None:
    for error in (InvalidArgument, HomeUnusable, ConfigError):
        assert getattr(klaw, error.__name__) is error and error.__name__ in klaw.__all__
