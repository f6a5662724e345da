"""Whole engine scenarios on PostgreSQL (`database.backend: postgres`): the same turns, auto-RAG, past
conversations and forgetting the SQLite tests drive, against a real PostgreSQL with pgvector
(tests/pg_server.py), the DSN read from the environment variable `database.urlEnv` names."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef
from tests.conftest import new_database
from tests.engine import harness
from tests.engine import test_recall_end_to_end as recall
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_forget_while_a_turn_runs import HANGS, SECRET, forget_during_the_turn
from tests.engine.test_memory_tools_turns import command, model_that_saves
from tests.pg_server import PgServer
from tests.store.raw import value

VARIABLE = "KLAW_TEST_DATABASE_URL"


@pytest.fixture
def on_postgres(postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine the test starts stores its memory in a fresh PostgreSQL database."""
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    monkeypatch.setattr(harness, "DATABASE", {"backend": "postgres", "urlEnv": VARIABLE})


@pytest.mark.usefixtures("on_postgres")
async def test_turns_store_memory_in_postgres_and_auto_rag_recalls_a_fact_31_messages_back(tmp_path: Path) -> None:
    await recall.test_a_fact_31_messages_back_is_recalled_by_its_name_and_in_words_and_small_talk_recalls_nothing(
        tmp_path
    )
    assert not (tmp_path / "home" / "klaw.db").exists()  # nothing went to SQLite


@pytest.mark.usefixtures("on_postgres")
async def test_a_past_conversation_is_found_on_postgres(tmp_path: Path) -> None:
    await recall.test_a_fact_the_summary_left_out_is_found_in_a_past_conversation(tmp_path)


@pytest.mark.usefixtures("on_postgres")
@pytest.mark.parametrize("hangs", HANGS)
async def test_forget_while_the_turn_runs_leaves_nothing_in_postgres(tmp_path: Path, hangs: str) -> None:
    """Decision 219 on PostgreSQL, where a turn's record write cancelled half-way was a query cut off."""
    async with running_engine(tmp_path) as h:
        store = h.engine.store
        assert isinstance(store, PostgresStore)
        await forget_during_the_turn(h, hangs)
        pattern = f"%{SECRET}%"
        left = await value(
            store,
            "SELECT (SELECT count(*) FROM messages WHERE content LIKE ? OR context LIKE ? OR metadata LIKE ?)"
            " + (SELECT count(*) FROM memory_chunks WHERE content LIKE ?)"
            " + (SELECT count(*) FROM log_records WHERE line LIKE ?)",  # the log, kept in the database
            pattern,
            pattern,
            pattern,
            pattern,
            pattern,
        )
        assert left == 0
        assert await store.memory_chunks.count(CHAT) == 0


@pytest.mark.usefixtures("on_postgres")
async def test_forget_erases_a_saved_memory_and_its_exchange_from_postgres(tmp_path: Path) -> None:
    secret = "flamingoteapot"
    async with running_engine(tmp_path) as h:
        store = h.engine.store  # what PostgreSQL itself holds is the point: read the store
        assert isinstance(store, PostgresStore)
        h.server.default_reply = model_that_saves
        await h.turn("the weather is nice today, a good day for a walk")
        await h.turn(f"please remember my locker code is {secret}")
        await h.engine.embedding_queue.wait_idle()
        assert await store.memory_chunks.count(CHAT) == 1
        answer = await command(h, "/forget last")
        assert answer.startswith("Forgot exchange ") and "4 message(s), 1 saved memory" in answer
        assert await store.memory_chunks.count(CHAT) == 0
        assert await store.search.full_text(CHAT, secret, limit=5) == []
        pattern = f"%{secret}%"
        left = await value(
            store,
            "SELECT (SELECT count(*) FROM messages WHERE content LIKE ? OR context LIKE ? OR metadata LIKE ?)"
            " + (SELECT count(*) FROM memory_chunks WHERE content LIKE ?)"
            " + (SELECT count(*) FROM summaries WHERE text LIKE ?)",
            pattern,
            pattern,
            pattern,
            pattern,
            pattern,
        )
        assert left == 0
        kept = {hit.message.content for hit in await store.search.full_text(CHAT, "walk", limit=5)}
        assert kept == {
            "the weather is nice today, a good day for a walk",
            "echo: the weather is nice today, a good day for a walk",
        }
        assert await store.search.full_text(ChatRef("console", "someone-else"), "walk", limit=5) == []
