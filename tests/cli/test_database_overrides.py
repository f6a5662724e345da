"""`klaw db migrate --to postgres` switched engine.yaml, but a `KLAW__DATABASE__BACKEND=sqlite` exported in the
shell (or set in service.env for the service) outranks the file: klaw stayed on klaw.db without a word. The
move and `klaw config check` now name the variable, where it is set and how to drop it (decision 486)."""

from __future__ import annotations

from pathlib import Path

from klaw.cli.db_move_config import switch_to_postgres
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


def words(text: str) -> str:
    return " ".join(text.split())


def test_a_move_says_the_shell_keeps_klaw_on_sqlite(tmp_path: Path, postgres_server: PgServer) -> None:
    home = a_home(tmp_path)
    assert klaw_here(home, "reindex").returncode == 0
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server)), "KLAW__DATABASE__BACKEND": "sqlite"}

    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)

    assert moved.returncode == 0, moved.stderr
    said = words(moved.stderr)
    assert (
        "warning: KLAW__DATABASE__BACKEND, exported in this shell, sets database.backend to sqlite, over"
        " engine.yaml's postgres" in said
    ), said
    assert "To run on what engine.yaml says: unset KLAW__DATABASE__BACKEND" in said
    assert "postgresql://" not in moved.stdout + moved.stderr


def test_config_check_names_an_override_in_the_shell_and_in_service_env(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    assert switch_to_postgres(home / "engine.yaml", VARIABLE) is not None
    (home / "service.env").write_text('# the service\nKLAW__DATABASE__BACKEND="sqlite"\n', encoding="utf-8")

    checked = klaw_here(home, "config", "check", env={"KLAW__DATABASE__URL_ENV": "OTHER_URL"})

    said = words(checked.stderr)
    assert (
        "warning: KLAW__DATABASE__URL_ENV, exported in this shell, sets database.urlEnv to OTHER_URL, over"
        " engine.yaml's KLAW_TEST_DATABASE_URL" in said
    ), said
    assert checked.returncode == 1 and "OTHER_URL (database.urlEnv) is not set" in said  # the refusal it explains
    assert (
        f"warning: KLAW__DATABASE__BACKEND, set in {home / 'service.env'}, sets database.backend to sqlite, over"
        " engine.yaml's postgres: the service (klaw service install) uses sqlite" in said
    ), said
    (home / "service.env").write_text("KLAW__DATABASE__BACKEND=postgres\n", encoding="utf-8")
    agreed = klaw_here(home, "config", "check", env={"KLAW__DATABASE__BACKEND": "sqlite"})
    assert "service.env" not in agreed.stderr  # the same as engine.yaml: nothing to say
    assert "sets database.backend to sqlite" in words(agreed.stderr)
