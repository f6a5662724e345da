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


async def refused_everywhere(dsn: str, said: str) -> None:
    """`said`, word for word, from `klaw config check`'s question, the engine's open and `klaw db info`'s and
    `klaw memory`'s open, which sets nothing up (not "none there yet": decision 467)."""
    problem = await start_problem(dsn, VARIABLE, 10)
    assert problem is not None and str(problem) == said, problem
    with pytest.raises(StorageError) as refused:
        await PostgresStore.open(dsn, variable=VARIABLE)
    assert str(refused.value) == said
    with pytest.raises(StorageError) as read:
        await PostgresStore.open(dsn, variable=VARIABLE, set_up_only=True)
    assert str(read.value) == said


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


async def test_a_role_path_leaving_out_klaws_schema_is_refused_and_the_fix_it_names_opens(
    postgres_server: PgServer,
) -> None:
    """adversary24: pgvector in a schema of its own (as managed services keep it), klaw's tables in public,
    then the role's path set to a new schema and pgvector's, public left out (decision 444)."""
    name = new_database(postgres_server)
    dsn = postgres_server.dsn(name)
    postgres_server.psql("CREATE SCHEMA ext; ALTER EXTENSION vector SET SCHEMA ext; CREATE SCHEMA app", name)
    postgres_server.psql(f"ALTER ROLE CURRENT_USER IN DATABASE {name} SET search_path = app, ext", name)
    said = (
        "klaw's tables are in schema public, which is not on the database user's search_path (app, ext): klaw"
        " would make new, empty ones in app and lose sight of them. Put schema public first on the path for"
        " this user (ALTER ROLE CURRENT_USER SET search_path = public, app, ext) or in the connection string"
        " (options=-c search_path=public,app,ext)"
    )

    await refused_everywhere(dsn, said)
    in_app = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'app'"
    assert postgres_server.psql(in_app, name).strip() == "0"  # nothing made there

    postgres_server.psql(f"ALTER ROLE CURRENT_USER IN DATABASE {name} SET search_path = public, app, ext", name)
    assert await start_problem(dsn, VARIABLE, 10) is None
    store = await PostgresStore.open(dsn, variable=VARIABLE)
    await store.aclose()
    assert postgres_server.psql(in_app, name).strip() == "0"


async def test_pgvector_off_a_fresh_databases_path_is_named_as_such_and_nothing_is_made(
    postgres_server: PgServer,
) -> None:
    """pgvector installed (in public), the role's path set to another schema: it said the server lacks
    pgvector and left a schema_version behind (adversary24, decision 444)."""
    name = f"klaw_vecpath_{new_database(postgres_server)}"
    postgres_server.admin(f"CREATE DATABASE {name}")
    dsn = postgres_server.dsn(name)
    postgres_server.psql("CREATE EXTENSION vector; CREATE SCHEMA app", name)
    postgres_server.psql(f"ALTER ROLE CURRENT_USER IN DATABASE {name} SET search_path = app", name)
    said = (
        f"the pgvector extension of the database named by {VARIABLE} is installed in schema public, which is"
        " not on the database user's search_path (app): klaw cannot see its vector type. Add schema public to"
        " the path for this user (ALTER ROLE CURRENT_USER SET search_path = app, public) or in the connection"
        " string (options=-c search_path=app,public)"
    )

    assert "lacks" not in said
    await refused_everywhere(dsn, said)
    in_app = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'app'"
    assert postgres_server.psql(in_app, name).strip() == "0"

    postgres_server.psql(f"ALTER ROLE CURRENT_USER IN DATABASE {name} SET search_path = app, public", name)
    store = await PostgresStore.open(dsn, variable=VARIABLE)
    await store.aclose()
    assert int(postgres_server.psql(in_app, name)) > 0  # made where the path says
