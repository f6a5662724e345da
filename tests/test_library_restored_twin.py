"""newcomer24 (decision 539, item 8): a PostgreSQL home's archive restored into another folder and started made
a silent second engine of the same home on the same database: both answered from it and a scheduled task ran
twice. The home's `home-id` (packed by `klaw backup`, kept by `klaw restore`) now tells a copy from another home:
a copy started while its original runs is refused naming the original's place and the fix; started after it
stopped, it is warned, once, that the home last ran elsewhere (a move is fine). Two real engines (library
programs) on real PostgreSQL, the real `klaw backup` and `klaw restore`."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw, StorageError
from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_TWIN_URL"
CONFIG = (
    "embedder:\n  backend: fake\n  dim: 32\nsummarizer:\n  enabled: false\n"
    f"database:\n  backend: postgres\n  urlEnv: {VARIABLE}\n"
)


def _echo() -> FunctionModel:
    async def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return f"echo: {messages[-1].content}"

    return FunctionModel(answer)


async def test_a_restored_copy_beside_its_running_original_is_refused_then_warned(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    original, copy = tmp_path / "original", tmp_path / "copy"
    original.mkdir(mode=0o700)
    (original / "engine.yaml").write_text(CONFIG, encoding="utf-8")
    place = f"{socket.gethostname()}:{original.resolve()}"
    async with Klaw(original, model=_echo()) as first:
        await first.ask("bob", "the miso soup recipe")
        backed = await asyncio.to_thread(klaw_here, original, "backup", str(tmp_path / "bk.tgz"))
        assert backed.returncode == 0, backed.stderr
        restored = await asyncio.to_thread(
            klaw_here, original, "restore", str(tmp_path / "bk.tgz"), "--home", str(copy)
        )
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert (copy / "home-id").read_text() == (original / "home-id").read_text()

        with pytest.raises(StorageError) as refused:
            await Klaw(copy, model=_echo()).start()

        said = str(refused.value)
        assert f"an engine of this same home is running on this database from another place, {place} (" in said
        assert "this home is a copy of that one (restored from its backup, or copied)" in said, said
        assert "Give this home its own database" in said and "or stop the engine at that place" in said, said
        assert "echo: the miso soup recipe" in [e.text for e in await first.history("bob")]

    caplog.set_level(logging.WARNING)
    async with Klaw(copy, model=_echo()) as second:  # the original stopped: a move is allowed, and said
        assert "echo: the miso soup recipe" in [e.text for e in await second.history("bob")]
    moved = [
        r.getMessage() for r in caplog.records if "this home last ran on this PostgreSQL database" in r.getMessage()
    ]
    assert len(moved) == 1 and f"from another place, {place} (started " in moved[0], moved
    caplog.clear()
    async with Klaw(copy, model=_echo()):  # the same place again: nothing to say
        pass
    assert not [r for r in caplog.records if "this home last ran" in r.getMessage()]


async def test_two_homes_of_their_own_share_a_database_as_before(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/postgres.md's several engines, one database: homes made apart have ids of their own."""
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    homes = [tmp_path / "a", tmp_path / "b"]
    for home in homes:
        home.mkdir(mode=0o700)
        (home / "engine.yaml").write_text(CONFIG, encoding="utf-8")
    async with Klaw(homes[0], model=_echo()) as a, Klaw(homes[1], model=_echo()) as b:
        await a.ask("bob", "from a")
        assert "echo: from a" in [e.text for e in await b.history("bob")]
