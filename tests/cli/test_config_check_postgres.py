"""`klaw config check` on a PostgreSQL home tries its database, changing nothing (newcomer12: it said
"valid" for a server that was not running, a database at a newer klaw's schema, or a user who may not
create tables, and the engine then refused to start). Against the tests' real PostgreSQL server."""

from __future__ import annotations

from itertools import count
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_CHECK_DSN"
_names = count()


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(f"database:\n  backend: postgres\n  urlEnv: {VARIABLE}\n", "utf-8")
    (home / "engine.yaml").chmod(0o600)
    return home


def _check(home: Path, dsn: str) -> tuple[int, str, str]:
    result = klaw_here(home, "config", "check", env={VARIABLE: dsn})
    said = " ".join(result.stderr.split())
    assert "Traceback" not in said and dsn not in said and dsn not in result.stdout  # the DSN is never shown
    return result.returncode, result.stdout, said


def _empty_database(server: PgServer) -> str:
    name = f"klaw_check_{next(_names)}"
    server.admin(f"CREATE DATABASE {name}")
    return name


def test_a_database_klaw_can_set_up_is_valid_and_left_as_it_was(tmp_path: Path, postgres_server: PgServer) -> None:
    home, name = _home(tmp_path), _empty_database(postgres_server)
    code, out, said = _check(home, postgres_server.dsn(name))
    assert code == 0 and out.strip().endswith(": valid"), said
    assert postgres_server.psql("SELECT to_regclass('schema_version') IS NULL", name).strip() == "t"  # not migrated
    # A database klaw set up already is valid too.
    code, out, said = _check(home, postgres_server.dsn(new_database(postgres_server)))
    assert code == 0 and out.strip().endswith(": valid"), said


def test_a_missing_database_and_a_newer_schema_are_refused_in_the_engines_words(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    home = _home(tmp_path)
    code, out, said = _check(home, postgres_server.dsn("klaw_no_such_database"))
    assert code == 1 and "valid" not in out, said
    assert "is valid, but the engine will not start on its database:" in said
    assert f"named by {VARIABLE}" in said and "does not exist" in said, said  # the name masked, as every DSN piece

    newer = new_database(postgres_server)
    postgres_server.psql("INSERT INTO schema_version (version, name, applied_at) VALUES (9999, 'later', 0)", newer)
    code, _, said = _check(home, postgres_server.dsn(newer))
    assert code == 1 and "the database is at schema version 9999" in said and "upgrade klaw" in said, said


def test_a_user_who_may_not_create_tables_is_told_what_to_grant(tmp_path: Path, postgres_server: PgServer) -> None:
    name = _empty_database(postgres_server)
    role = f"klaw_check_reader_{next(_names)}"
    postgres_server.admin(f"CREATE ROLE {role} LOGIN")
    postgres_server.psql(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA public TO {role}", name)
    dsn = postgres_server.dsn(name).replace("postgresql://postgres@", f"postgresql://{role}@")
    code, _, said = _check(_home(tmp_path), dsn)
    assert code == 1, said
    assert f"the database user of {VARIABLE} may not create klaw's tables in schema public" in said, said
    assert "GRANT CREATE ON SCHEMA public" in said


def test_a_user_of_a_store_another_made_may_open_it_and_one_without_create_is_told_the_schema_grant(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """adversary22: every open ran CREATE TABLE IF NOT EXISTS schema_version, which needs CREATE on the schema,
    so a user granted only the use of a store another user made was refused as unable to create tables; and
    the refusal advised CREATE on the database, which PostgreSQL 15 and later does not let make tables."""
    made = new_database(postgres_server)  # migrated by the server's owner
    user = f"klaw_check_user_{next(_names)}"
    postgres_server.admin(f"CREATE ROLE {user} LOGIN")
    postgres_server.psql(
        f"REVOKE CREATE ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA public TO {user};"
        f" GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {user};"
        f" GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {user}",
        made,
    )
    as_user = postgres_server.dsn(made).replace("postgresql://postgres@", f"postgresql://{user}@")
    home = _home(tmp_path)
    opened = klaw_here(home, "db", "info", env={VARIABLE: as_user})
    assert opened.returncode == 0, opened.stderr
    assert _check(home, as_user)[0] == 0

    empty = _empty_database(postgres_server)
    postgres_server.psql(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA public TO {user}", empty)
    postgres_server.admin(f"GRANT CREATE ON DATABASE {empty} TO {user}")  # what the old words advised: no help
    # `klaw db info` leaves a database klaw never set up as it is (decision 442): the check says it
    code, _, said = _check(home, as_user.replace(f"/{made}?", f"/{empty}?"))
    assert code == 1, said
    assert f"the database user of {VARIABLE} may not create klaw's tables" in said, said
    assert "GRANT CREATE ON SCHEMA public TO that user" in said and "CREATE on the database" not in said, said
