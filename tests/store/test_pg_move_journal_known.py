"""A table named `reindex_state` that a person left in klaw's schema is not an interrupted move: klaw's own
journal is known by its three tables and their columns (decision 450). Before, the name alone refused every
start ("a move into the PostgreSQL database ... was interrupted"), and a move into that database would have
taken the table for its journal. Against the tests' real PostgreSQL, through `klaw config check`'s question,
the engine's open and the move's own first look."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.store.postgres.migrations import start_problem
from klaw.store.postgres.rebuild import PostgresMigration, PostgresRebuildJournal
from klaw.store.postgres.store import PostgresStore
from klaw.store.rebuild_protocol import TargetRefused
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


async def test_a_reindex_state_table_of_a_persons_own_is_not_taken_for_an_interrupted_move(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    name = new_database(postgres_server)  # klaw's tables, no message yet
    dsn = postgres_server.dsn(name)
    # The same name and even the same columns as the journal's key/value table: still not klaw's journal.
    postgres_server.psql(
        "CREATE TABLE reindex_state (key text PRIMARY KEY, value text NOT NULL);"
        " INSERT INTO reindex_state VALUES ('embedder', 'my own tool''s')",
        name,
    )
    move = PostgresMigration(dsn, VARIABLE, tmp_path / "klaw.db")

    assert await start_problem(dsn, VARIABLE, 10) is None
    store = await PostgresStore.open(dsn, variable=VARIABLE)  # an engine's start
    await store.aclose()
    with pytest.raises(TargetRefused) as refused:  # a move would have written its journal into that table
        move.exists()
    assert str(refused.value) == (
        f"the PostgreSQL database named by {VARIABLE} has a table reindex_state that is not klaw's: the move"
        " keeps its journal under that name. Rename or drop that table, or move into another database; this"
        " one is left as it is"
    )
    assert postgres_server.psql("SELECT value FROM reindex_state", name).strip() == "my own tool's"

    # klaw's own journal, as a move killed part-way leaves it, is still an interrupted move.
    postgres_server.psql("DROP TABLE reindex_state", name)
    store = await PostgresStore.open(dsn, variable=VARIABLE, moving=True)
    try:
        await PostgresRebuildJournal(store).create()
    finally:
        await store.aclose()
    problem = await start_problem(dsn, VARIABLE, 10)
    assert problem is not None and f"a move into the PostgreSQL database named by {VARIABLE} was interrupted" in str(
        problem
    )
    assert move.exists() is True
