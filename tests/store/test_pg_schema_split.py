"""A schema named after the role, made after klaw's tables went into `public`, comes first on PostgreSQL's
default search path ("$user", public): `klaw config check` said valid, and any open (`klaw db info` too)
made 21 empty tables there, the person's memory out of sight (adversary23, decision 436). The check and
the open now refuse, naming where klaw's tables are, and make nothing; a path the connection sets itself
(a bench's or a reindex's schema first, decision 429) still opens. Against the tests' real PostgreSQL."""

from __future__ import annotations

import pytest

from klaw.store.postgres.migrations import start_problem
from klaw.store.postgres.store import PostgresStore
from klaw.store.protocol import StorageError
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


async def test_a_schema_named_after_the_role_before_public_is_refused_not_migrated(postgres_server: PgServer) -> None:
    name = new_database(postgres_server)  # klaw's tables in public
    dsn = postgres_server.dsn(name)
    postgres_server.psql("CREATE SCHEMA AUTHORIZATION CURRENT_USER", name)
    role = postgres_server.psql("SELECT current_user", name).strip()
    said = (
        f"klaw's tables are in schema public, but schema {role} comes first on the database user's search_path,"
        " where klaw would make new, empty ones"
    )

    problem = await start_problem(dsn, VARIABLE, 10)
    assert problem is not None and said in str(problem), problem
    with pytest.raises(StorageError, match=said.replace("(", r"\(").replace(")", r"\)")):
        await PostgresStore.open(dsn, variable=VARIABLE)
    tables = f"SELECT count(*) FROM information_schema.tables WHERE table_schema = '{role}'"
    assert postgres_server.psql(tables, name).strip() == "0"  # nothing made there

    # A path the connection sets itself is meant: a schema of its own first (as a bench's) opens and is used.
    store = await PostgresStore.open(dsn, variable=VARIABLE, search_path=[role, "public"])
    await store.aclose()
    assert int(postgres_server.psql(tables, name)) > 0
    assert await start_problem(dsn + "&options=-c%20search_path%3Dpublic", VARIABLE, 10) is None
