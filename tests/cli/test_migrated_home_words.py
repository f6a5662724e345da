"""A home moved into PostgreSQL by `klaw db migrate`, as a person then uses it: what forgetting says it
erased (and the SQLite copy the migrate left, which it reaches too: decision 539), what reindex says it
rebuilt, and what the migrate says to change in engine.yaml (newcomer9's findings; decision 394)."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import psycopg

from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.cli.test_reindex_cmd import a_home
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


def _said(text: str) -> str:
    return " ".join(text.split())


def _copy_holds(home: Path, word: str) -> bool:
    """Whether the SQLite copy the migrate left (klaw.db, its side files, the chats' JSONL files) holds `word`."""
    files = [p for p in home.glob("klaw.db*") if p.is_file()] + list((home / "conversations").glob("*/*.jsonl"))
    return any(word.encode() in p.read_bytes() for p in files)


def _moved(tmp_path: Path, postgres_server: PgServer) -> tuple[Path, dict[str, str], str]:
    home = a_home(tmp_path)
    assert klaw_here(home, "reindex").returncode == 0  # klaw.db, as a home that ran on SQLite has
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server))}
    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)
    assert moved.returncode == 0, moved.stderr
    config = home / "engine.yaml"
    config.write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    return home, env, moved.stdout


def test_forgetting_on_a_migrated_home_names_postgres_and_erases_the_sqlite_copy_too(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    home, env, _ = _moved(tmp_path, postgres_server)
    assert _copy_holds(home, "lighthouse")
    listed = klaw_here(home, "memory", "list", env=env)
    assert listed.returncode == 0 and "segment 1 (id 1):" in listed.stdout, listed.stderr

    forgot = klaw_here(home, "memory", "forget", "segment", "1", "--yes", env=env)

    said = _said(forgot.stdout)
    assert forgot.returncode == 0, forgot.stderr
    assert f"erased from the PostgreSQL database named by {VARIABLE}" in said, said
    assert "erased from klaw.db" not in said and "log file(s) rewritten" not in said
    # the copy the migrate left held it: its JSONL file rewritten, its klaw.db deleted (decision 539)
    assert "The SQLite copy 'klaw db migrate' left in this home held it too: 1 of its JSONL log file(s)" in said, said
    assert f"its {home / 'klaw.db'} deleted (with its side files), as it held it" in said, said
    assert not (home / "klaw.db").exists() and not _copy_holds(home, "lighthouse")
    assert not list(home.glob("klaw.db*")), list(home.glob("klaw.db*"))  # its float vectors too (decision 544)


def test_forget_typed_in_a_chat_on_a_migrated_home_erases_the_sqlite_copy_too(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """`/forget` in the chat said "erased from the database … and the conversation log" and named no copy,
    where `klaw memory forget` names it: the chat now says the same, in the same words (decision 394), and
    the engine's forget erases the copy as the command's does (decision 539)."""
    home, env, _ = _moved(tmp_path, postgres_server)
    person = {**env, "LOGNAME": "me", "USER": "me"}  # the console chat of a_home's records: console:me

    typed = klaw(
        home, "chat", "--skip-check", env=person, stdin="/forget segment 1 confirm\n"
    )  # asked first without it (526)

    said = _said(typed.stdout)
    assert typed.returncode == 0, typed.stderr
    erased = f"Forgot segment 1 (id 1): 6 message(s). It is erased from the PostgreSQL database named by {VARIABLE}"
    assert erased in said, said
    assert "conversation log" not in said
    assert "The SQLite copy 'klaw db migrate' left in this home held it too: 1 of its JSONL log file(s)" in said, said
    assert not (home / "klaw.db").exists() and not _copy_holds(home, "lighthouse")


def test_the_migrate_names_the_line_to_change_and_the_copy_it_left(tmp_path: Path, postgres_server: PgServer) -> None:
    home = a_home(tmp_path)
    initial = (home / "engine.yaml").read_text(encoding="utf-8")
    assert klaw_here(home, "reindex").returncode == 0
    # the section `klaw init` writes, as a person's home has it
    (home / "engine.yaml").write_text(
        initial + "\nmemory:\n  coreMaxChars: 2000\n\ndatabase:\n  backend: sqlite\n  path: klaw.db\n", encoding="utf-8"
    )
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server))}

    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)

    said = _said(moved.stdout)
    assert moved.returncode == 0, moved.stderr
    config = home / "engine.yaml"
    # The move switches engine.yaml itself: a person who missed the line kept writing to klaw.db, and those
    # messages never reached PostgreSQL (newcomer19, decision 476). Only the two lines change; a copy is kept.
    written = initial + "\nmemory:\n  coreMaxChars: 2000\n\ndatabase:\n  backend: sqlite\n  path: klaw.db\n"
    switched = written.replace("  backend: sqlite\n", f"  backend: postgres\n  urlEnv: {VARIABLE}\n")
    assert config.read_text(encoding="utf-8") == switched
    kept = [path for path in home.iterdir() if path.name.startswith("engine.yaml.bak-")]
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == written
    assert oct(config.stat().st_mode & 0o777) == oct(kept[0].stat().st_mode & 0o777) == "0o600"
    assert f"{config} now says database backend: postgres and urlEnv: {VARIABLE}, the rest of it unchanged" in said
    assert f"(the file as it was is {kept[0]})" in said, said
    # A service reads service.env, not this shell: said with the file's name (check52, decision 480).
    assert f"A service (klaw service install) needs {VARIABLE} in its environment too: it reads" in said, said
    assert f"{home / 'service.env'}, which klaw service install writes" in said, said
    info = klaw_here(home, "db", "info", env=env)
    assert info.returncode == 0 and f"PostgreSQL database named by {VARIABLE}" in _said(info.stdout), info.stdout
    assert f"{home / 'klaw.db'} and the chats' JSONL log under {home / 'conversations'} are left as they were" in said
    assert "/forget on the PostgreSQL home erase what they forget from them too" in said, said
    assert "klaw backup leaves them out" in said
    assert f"Keep {home / 'conversations'}/scheduler_*: the scheduled tasks' run logs stay files." in said


def test_the_printed_removal_deletes_the_copy_and_keeps_the_task_run_logs(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """newcomer12: following the printed `rm -r …/conversations` deleted the scheduled tasks' run logs, which
    stay files on a PostgreSQL home (`klaw log check` reads them). The command given, run as printed in a
    shell, deletes klaw.db and the chats' folders and keeps every `scheduler_<task>/`."""
    home, env, moved = _moved(tmp_path, postgres_server)
    runs = home / "conversations" / "scheduler_bees"
    runs.mkdir(mode=0o700)
    (runs / "2026-11-28.jsonl").write_text("", encoding="utf-8")
    chats = [d for d in (home / "conversations").iterdir() if d.name != "scheduler_bees"]
    assert chats

    found = re.search(r"delete them \((.*?)\)\. Keep", _said(moved))  # the migrate's words name it
    assert found is not None, moved
    removed = subprocess.run(["sh", "-c", found.group(1)], capture_output=True, text=True, check=False)
    assert removed.returncode == 0, removed.stderr
    assert (runs / "2026-11-28.jsonl").exists()
    assert not any(d.exists() for d in chats) and not (home / "klaw.db").exists()
    checked = klaw_here(home, "log", "check", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "scheduler_bees" in checked.stdout and "from before this home moved" not in checked.stdout, checked.stdout


def test_a_held_home_refuses_the_migrate_naming_the_migrate(tmp_path: Path, postgres_server: PgServer) -> None:
    from klaw.home_lock import HomeLock

    home = a_home(tmp_path)
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server))}
    lock = HomeLock.acquire(home)  # an engine (klaw serve) holds the home
    try:
        # a process, as the lock is held by another (an engine)
        refused = klaw(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)
    finally:
        lock.release()
    said = _said(refused.stderr)
    assert refused.returncode == 1 and "then run 'klaw db migrate --to postgres' again" in said, said
    assert "klaw reindex" not in said and "Traceback" not in refused.stderr
    assert refused.stdout == "", repr(refused.stdout)  # nothing before the refusal (decision 490)


def test_reindex_on_a_postgres_home_names_it_and_keeps_each_backup(tmp_path: Path, postgres_server: PgServer) -> None:
    home, env, _ = _moved(tmp_path, postgres_server)

    kept = klaw_here(home, "reindex", "--keep-backup", env=env)

    said = _said(kept.stdout)
    assert kept.returncode == 0, kept.stderr
    assert f"Rebuilt the PostgreSQL database named by {VARIABLE}" in said and "Rebuilt /" not in said, said
    schema = re.search(r"schema (klaw_backup_\w+) of the PostgreSQL database named by " + VARIABLE, said)
    assert schema is not None, said
    assert klaw_here(home, "reindex", env=env).returncode == 0  # a plain run drops no kept backup
    again = klaw_here(home, "reindex", "--keep-backup", env=env)
    second = re.search(r"schema (klaw_backup_\w+) of", _said(again.stdout))
    assert second is not None and second.group(1) != schema.group(1)
    with psycopg.connect(env[VARIABLE]) as connection:
        names = {row[0] for row in connection.execute("SELECT nspname FROM pg_namespace")}
    assert {schema.group(1), second.group(1)} <= names


def test_the_help_names_both_stores_and_the_kept_backups(tmp_path: Path) -> None:
    reindex_help = _said(klaw_here(tmp_path, "reindex", "--help").stdout)
    assert "klaw.db.bak-" in reindex_help and "klaw_backup_" in reindex_help
    assert "PostgreSQL" in _said(klaw_here(tmp_path, "db", "--help").stdout)


def test_a_migrate_to_a_server_that_refuses_names_its_port_and_does_not_speak_of_resuming(tmp_path: Path) -> None:
    """newcomer12: "port ••••••" hid the port, and "run the command again to resume" followed a failure at the
    first step, where nothing had started."""
    home = a_home(tmp_path)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {VARIABLE: f"postgresql://klaw:hunter2secret@127.0.0.1:{port}/klaw?connect_timeout=2"}
    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)
    said = _said(moved.stderr)
    assert moved.returncode == 1, moved.stdout + moved.stderr
    assert f'connection to server at "127.0.0.1", port {port} failed' in said, said
    assert "run the command again once that is fixed" in said and "resume" not in said, said
    assert "hunter2secret" not in said
