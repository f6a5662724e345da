"""`klaw db migrate --to postgres` as a person runs it: klaw's entry point moves a home (its log and klaw.db)
into a real PostgreSQL database, with progress bars and the row counts of both side by side; the
engine then runs on PostgreSQL and finds what was said before."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from klaw.config import DatabaseConfig
from klaw.store.backend import open_storage
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.cli.test_reindex_cmd import CHAT, a_home
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


def test_a_home_moves_into_postgres_with_equal_counts_and_only_once(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = a_home(tmp_path)
    assert klaw_here(home, "reindex").returncode == 0  # klaw.db, as a home that ran on SQLite has
    assert klaw_here(home, "memory", "search", "--chat", "console:me", "lighthouse").returncode == 0
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server))}

    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)

    assert moved.returncode == 0, moved.stderr
    out = moved.stdout
    for expected in ("rebuilding rows", "embedding", "klaw.db", "PostgreSQL", "urlEnv: " + VARIABLE):
        assert expected in out, out
    # into a pipe, the rebuild's progress as plain lines only: its bars were drawn after them too (newcomer24)
    progress = [line for line in out.splitlines() if line.startswith(("reading log files", "rebuilding", "embedding"))]
    assert progress and all(re.fullmatch(r"[a-z ]+: \d+ of \d+", line) for line in progress), out
    messages = next(line for line in out.splitlines() if "│ messages" in line)
    assert messages.count(" 6 ") == 2, out  # six messages in klaw.db and in PostgreSQL
    assert "differ" not in out and "lighthouse" not in out
    assert "postgresql://" not in out + moved.stderr

    async def search() -> list[str]:
        store = await open_storage(tmp_path, DatabaseConfig(backend="postgres", url_env=VARIABLE))
        try:
            hits = await store.search.full_text(CHAT, "lighthouse island", limit=10)
            counts = await store.counts()
        finally:
            await store.aclose()
        assert counts.vectors == 6  # embedded on the way
        return [hit.message.content for hit in hits]

    monkeypatch.setenv(VARIABLE, env[VARIABLE])
    assert len(asyncio.run(search())) == 6

    again = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)
    assert again.returncode != 0
    refused = " ".join(again.stderr.split())
    assert "already holds 6 klaw messages" in refused
    assert "resume" not in refused and ".." not in refused  # running it again would change nothing
    assert "Traceback" not in again.stderr


def test_a_missing_variable_or_a_value_in_its_place_is_one_line(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    unset = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", "KLAW_NOT_SET_ANYWHERE")
    assert unset.returncode == 2 and "KLAW_NOT_SET_ANYWHERE" in unset.stderr and "is not set" in unset.stderr
    pasted = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", "postgresql://u:hunter2@h/db")
    assert pasted.returncode == 2 and "hunter2" not in pasted.stderr
    sqlite = klaw_here(home, "db", "migrate", "--to", "sqlite")
    assert sqlite.returncode == 2 and "--to postgres" in sqlite.stderr


def test_reindex_on_a_postgres_home_rebuilds_it_from_the_log_the_database_keeps(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = a_home(tmp_path)
    database = new_database(postgres_server)
    env = {VARIABLE: postgres_server.dsn(database)}
    assert klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env).returncode == 0
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    shutil.rmtree(home / "conversations")  # the moved home's log is in the database (log_records)
    monkeypatch.setenv(VARIABLE, env[VARIABLE])

    async def state() -> tuple[list[str], int, int]:
        store = await open_storage(tmp_path, DatabaseConfig(backend="postgres", url_env=VARIABLE))
        try:
            hits = await store.search.full_text(CHAT, "lighthouse island", limit=10)
            counts = await store.counts()
        finally:
            await store.aclose()
        return sorted(hit.message.content for hit in hits), counts.messages, counts.vectors

    before = asyncio.run(state())
    sent = "INSERT INTO sends (target, sent_at) VALUES ('telegram:42', 1)"  # message_send's place (decision 418)
    postgres_server.psql(sent, database)
    result = klaw_here(home, "reindex", env=env)

    assert result.returncode == 0, result.stderr
    assert "log records replayed" in result.stdout and "Traceback" not in result.stderr
    carried = postgres_server.psql("SELECT target FROM sends", database).strip()
    assert carried == "telegram:42"  # as the settings are: the log holds no sends (decision 435)
    assert asyncio.run(state()) == before == (before[0], 6, 6)
    assert not (home / "klaw.db").exists() and not (home / "conversations").exists()
    again = klaw_here(home, "reindex", env=env)  # a rebuilt home rebuilds again (its log came along)
    assert again.returncode == 0 and asyncio.run(state()) == before


async def test_the_first_start_after_a_move_sends_again_only_the_reply_klaw_db_still_waited_for(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three replies shown (klaw.db confirmed them) and one a crash left unshown: after the move, the first
    start on PostgreSQL sends the unshown one once, never the three again (newcomer15: every reply of the
    log was sent again, as its fold marks every closed reply as waiting); `message_send`'s places of the
    last hour come along too (the per-hour cap holds across the move)."""
    import sqlite3

    from klaw import AgentMessage, ChatRef, FunctionModel, Klaw
    from tests.test_library_agent_messages import CONFIG, cut_off_after_the_reply

    home = tmp_path / "home"
    shown: asyncio.Queue[AgentMessage] = asyncio.Queue()
    model = FunctionModel(lambda messages, info: f"you said {messages[-1].content}")
    async with Klaw(home, config=CONFIG, model=model, on_message=shown.put) as agent:
        for question in ("one", "two", "three"):
            assert await agent.ask("alice", question) == f"you said {question}"
    await asyncio.to_thread(cut_off_after_the_reply, home, ChatRef("library", "alice"))
    with sqlite3.connect(home / "klaw.db") as db:  # as message_send's reservation leaves it
        db.execute("INSERT INTO sends (target, sent_at) SELECT 'library:bob', max(created_at) FROM messages")
    (home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server))}

    moved = await asyncio.to_thread(
        klaw, home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, "--samples", "0", env=env
    )

    assert moved.returncode == 0, moved.stdout + moved.stderr
    monkeypatch.setenv(VARIABLE, env[VARIABLE])
    config = {**CONFIG, "database": {"backend": "postgres", "urlEnv": VARIABLE}}
    async with Klaw(home, config=config, model=model, on_message=shown.put) as agent:
        resent = await asyncio.wait_for(shown.get(), 60)
        assert resent.text == "the answer the crash hid"
        assert await agent.ask("alice", "four") == "you said four"  # a turn: the start's sending is long done
        assert shown.empty(), shown.get_nowait()
        store = await open_storage(home, DatabaseConfig(backend="postgres", url_env=VARIABLE))
        try:
            async with store.db.connection() as connection:  # type: ignore[attr-defined]
                cursor = await connection.execute("SELECT target FROM sends")
                assert [row[0] for row in await cursor.fetchall()] == ["library:bob"]
        finally:
            await store.aclose()
