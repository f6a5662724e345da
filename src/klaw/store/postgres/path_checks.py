"""What a PostgreSQL database user's search path, or a move left unfinished, would make an engine get wrong.

Each check reads the catalogue and changes nothing, so both an open (before it migrates) and `klaw config
check` run it. A path the connection itself sets (`klaw bench` and `klaw reindex` put a schema of their
own first on purpose, decision 429; a DSN's `options`) is taken as meant. Decisions 436, 444 and 475
(a restore that left pgvector out).
"""

from __future__ import annotations

from klaw.store.postgres.connection import Connection, fetch_value

# Schemas of klaw's own making that hold a copy of its tables beside the person's: a reindex's build, the
# backups its swaps keep (decision 395), a bench run's. None is the home an open should find.
_NOT_A_HOME = (
    "n.nspname <> 'klaw_reindex' AND n.nspname NOT LIKE 'klaw\\_backup%%' AND n.nspname NOT LIKE 'klaw\\_bench\\_%%'"
)


async def split_problem(connection: Connection) -> str | None:
    """klaw's tables not in the search path's first schema, where klaw would make new, empty ones, the
    person's memory out of sight: found further on the path (adversary23: a schema named after the role,
    "$user", made after klaw's tables went into `public`), or in a schema off the path (adversary24: the
    role's path set to schemas of its own, `ALTER ROLE ... SET search_path = app, ext`)."""
    found = await connection.execute(
        "SELECT current_schema(), (SELECT source FROM pg_settings WHERE name = 'search_path'),"
        " current_schemas(false), ARRAY(SELECT s FROM unnest(current_schemas(false)) AS s"
        " WHERE to_regclass(format('%I.schema_version', s)) IS NOT NULL)"
    )
    row = await found.fetchone()
    if row is None:
        return None
    first, source, path, holding = row
    if source in ("client", "session") or first in holding:
        return None
    if holding:
        return (
            f"klaw's tables are in schema {holding[0]}, but schema {first or '(none)'} comes first on the database"
            f" user's search_path, where klaw would make new, empty ones and lose sight of them: drop schema {first}"
            f" if it is not needed, or set the path for this user (ALTER ROLE CURRENT_USER SET search_path ="
            f" {holding[0]}) or in the connection string (options=-c search_path={holding[0]})"
        )
    off_path = await fetch_value(
        connection,
        "SELECT n.nspname FROM pg_namespace n WHERE n.nspname <> ALL (current_schemas(true))"
        f" AND {_NOT_A_HOME} AND (SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid"
        " AND c.relname IN ('schema_version', 'messages', 'log_records') AND c.relkind IN ('r', 'p')) = 3"
        " ORDER BY n.nspname <> 'public', n.nspname LIMIT 1",
    )
    if off_path is None:
        return None
    wanted = ", ".join([str(off_path), *(str(schema) for schema in path)])
    return (
        f"klaw's tables are in schema {off_path}, which is not on the database user's search_path"
        f" ({', '.join(str(schema) for schema in path) or 'no schema'}): klaw would make new, empty ones in"
        f" {first or 'the first schema made there'} and lose sight of them. Put schema {off_path} first on the"
        f" path for this user (ALTER ROLE CURRENT_USER SET search_path = {wanted}) or in the connection string"
        f" (options=-c search_path={wanted.replace(', ', ',')})"
    )


async def vector_off_path_problem(connection: Connection, variable: str) -> str | None:
    """pgvector installed in a schema the search path leaves out: its type `vector` is out of sight, so
    klaw's first migration would fail as if the extension were missing (adversary24), leaving a
    `schema_version` behind. None when it is on the path, or not installed (the migration installs it)."""
    schema = await fetch_value(
        connection,
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
        " AND extnamespace::regnamespace::text <> ALL (current_schemas(true))",
    )
    if schema is None:
        return None
    path = [str(name) for name in await fetch_value(connection, "SELECT current_schemas(false)")]
    wanted = ", ".join([*path, str(schema)])
    return (
        f"the pgvector extension of the database named by {variable} is installed in schema {schema}, which is"
        f" not on the database user's search_path ({', '.join(path) or 'no schema'}): klaw cannot see its vector"
        f" type. Add schema {schema} to the path for this user (ALTER ROLE CURRENT_USER SET search_path = {wanted})"
        f" or in the connection string (options=-c search_path={wanted.replace(', ', ',')})"
    )


# The tables klaw's first migration made with pgvector's type: a pg_restore that may not create the extension
# skips exactly these (newcomer19: the pool then failed to register the type, "cannot reach the server" 10 s on).
VECTOR_TABLES = ("message_vectors", "memory_vectors", "summary_vectors")
_RESTORE = "docs/postgres.md, Restoring a backup"


async def restore_problem(connection: Connection, variable: str) -> str | None:
    """klaw's tables without pgvector, or without its vector tables: what a `pg_restore` run by a user who
    may not create extensions leaves (every other table restored, `schema_version` included, so no migration
    makes them again). None on a database klaw has not set up (its first migration creates the extension)."""
    made = "SELECT to_regclass(format('%%I.schema_version', current_schema())) IS NOT NULL"
    # a migration recorded: a first one refused part-way (no pgvector there yet) leaves an empty schema_version
    if not await fetch_value(connection, made) or not await fetch_value(
        connection, "SELECT EXISTS (TABLE schema_version)"
    ):
        return None
    found = await connection.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'),"
        " ARRAY(SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NULL)",
        (list(VECTOR_TABLES),),
    )
    row = await found.fetchone()
    if row is None:
        return None
    has_vector, missing = row
    if not has_vector:
        return (
            f"the PostgreSQL database named by {variable} holds klaw's tables but not the vector extension (pgvector),"
            " as a pg_restore run by a user who may not create extensions leaves it (its vector tables were skipped"
            " too): have a superuser run CREATE EXTENSION vector in that database, then run the pg_restore again with"
            f" --clean --if-exists ({_RESTORE})"
        )
    if missing:
        return (
            f"the PostgreSQL database named by {variable} holds klaw's tables but not {', '.join(missing)}, which a"
            " pg_restore that could not create the vector extension skipped: now that the extension is there, run"
            f" the pg_restore again with --clean --if-exists ({_RESTORE})"
        )
    return None


# klaw's move journal (`_JOURNAL` in rebuild.py): its three tables, each with exactly these columns, in this
# order. A table a person made under one of those names (a `reindex_state` of their own) is not a move.
JOURNAL = (
    "reindex_files.key text, reindex_files.size bigint, reindex_files.mtime_ns bigint, reindex_files.lines bigint,"
    " reindex_skipped.key text, reindex_skipped.line bigint, reindex_skipped.reason text,"
    " reindex_state.key text, reindex_state.value text"
)
# The columns of the tables named as the journal's in the schema klaw uses (NULL: none there). No
# parameters, so psycopg reads it as written, with or without `%` placeholders' escaping.
JOURNAL_FOUND = (
    "SELECT string_agg(format('%s.%s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod)), ', '"
    " ORDER BY c.relname, a.attnum) FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
    " WHERE c.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = current_schema())"
    " AND c.relname IN ('reindex_files', 'reindex_skipped', 'reindex_state') AND c.relkind IN ('r', 'p')"
    " AND a.attnum > 0 AND NOT a.attisdropped"
)


async def move_problem(connection: Connection, variable: str) -> str | None:
    """A `klaw db migrate --to postgres` into this database stopped before it finished: its journal (the
    `reindex_*` tables, dropped as the move ends) is in the schema klaw uses. The store there is half
    made (chats not yet rebuilt, replies sent long ago still marked waiting until klaw.db's are copied),
    so an engine must not run on it; the move, run again, resumes and finishes it (decision 444). Known by
    its three tables and their columns, not by a name alone: a table of that name left there by hand
    blocked every start (decision 450)."""
    cursor = await connection.execute(JOURNAL_FOUND.encode())
    row = await cursor.fetchone()
    if row is None or row[0] != JOURNAL:
        return None
    return (
        f"a move into the PostgreSQL database named by {variable} was interrupted: run 'klaw db migrate --to"
        " postgres' again to finish it (it resumes where it stopped) before klaw runs on that database; until"
        " then it holds a half-moved home (chats not all rebuilt, old replies marked as not yet delivered)"
    )


async def open_problem(connection: Connection, variable: str, *, moving: bool = False) -> str | None:
    """The first of the above that would stop an engine's start on the database; `moving`: the move's own
    open (`klaw db migrate`), which resumes its journal rather than being refused by it."""
    if (split := await split_problem(connection)) is not None:
        return split
    if (hidden := await vector_off_path_problem(connection, variable)) is not None:
        return hidden
    if (restored := await restore_problem(connection, variable)) is not None:
        return restored
    return None if moving else await move_problem(connection, variable)
