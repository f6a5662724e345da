"""newcomer24 (decision 539, item 3): a library program with `config=` ran on a home, the home was moved with
`klaw db migrate --to postgres`, and the same program went on writing into the klaw.db the move left, `/status`
saying SQLite, with no word. Now its start is refused naming the `database` to add to `config=`; with it, the
program runs on PostgreSQL and finds its messages from before the move. And the move names the program's other
embedder. Real PostgreSQL, a real home, the real `klaw db migrate`, a FunctionModel."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from klaw import AgentInfo, ChatMessage, ConfigError, FunctionModel, Klaw
from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.pg_server import PgServer


def _echo() -> FunctionModel:
    async def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return f"echo: {messages[-1].content}"

    return FunctionModel(answer)


def _program(dim: int) -> dict[str, Any]:
    return {"embedder": {"backend": "fake", "dim": dim}, "summarizer": {"enabled": False}}


async def _moved(tmp_path: Path, postgres_server: PgServer, *, program_dim: int) -> tuple[Path, dict[str, str], str]:
    home = tmp_path / "home"
    async with Klaw(home, config=_program(program_dim), model=_echo()) as agent:
        await agent.ask("bob", "the miso soup recipe from before the move")
    (home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    env = {"DB2": postgres_server.dsn(new_database(postgres_server))}
    moved = await asyncio.to_thread(klaw_here, home, "db", "migrate", "--to", "postgres", "--url-env", "DB2", env=env)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    return home, env, " ".join(moved.stdout.split())


async def test_a_program_left_on_sqlite_after_the_move_is_refused_naming_what_to_add(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, env, _ = await _moved(tmp_path, postgres_server, program_dim=32)
    monkeypatch.setenv("DB2", env["DB2"])

    with pytest.raises(ConfigError) as refused:
        await Klaw(home, config=_program(32), model=_echo()).start()

    said = str(refused.value)
    assert "the config= given to Klaw keeps the memory in SQLite" in said, said
    assert "this home's engine.yaml keeps it in the PostgreSQL database named by DB2" in said, said
    assert 'Add "database": {"backend": "postgres", "urlEnv": "DB2"} to config=' in said, said
    assert Klaw.opened(home) is None
    fixed = {**_program(32), "database": {"backend": "postgres", "urlEnv": "DB2"}}
    async with Klaw(home, config=fixed, model=_echo()) as agent:
        status = await agent.ask("bob", "/status")
        found = await agent.search_memory("bob", "miso soup recipe")
    assert "PostgreSQL" in status, status
    assert any("miso soup" in hit.text for hit in found), found


async def test_the_move_names_the_programs_other_embedder_and_what_to_change(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """The program embedded klaw.db with its own embedder (dim 16); engine.yaml names another (dim 32), which
    the move embedded with: said, with both ways out, where it said only 'another embedder'."""
    _, _, said = await _moved(tmp_path, postgres_server, program_dim=16)

    assert "klaw.db's vectors are of fake-hash-16 (dim 16), PostgreSQL's of fake-hash-32 (dim 32)" in said, said
    assert "A program that gave klaw.db its own embedder (config= or embedder=) is refused on PostgreSQL" in said
    assert "or set engine.yaml's embedder to fake-hash-16's and run 'klaw reindex'" in said, said
