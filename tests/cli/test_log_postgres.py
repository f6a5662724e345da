"""`klaw log check` and `klaw log export` on a PostgreSQL home, whose log is the database's `log_records`
(docs/decisions/132-log-with-several-engines.md), as a person runs them: klaw's entry point in this process
(tests/cli/klaw_here.py) on a home moved into a real PostgreSQL; a malformed row is named (day, line,
seq; never content), exported as it is, and skipped by `klaw reindex` on PostgreSQL and on an SQLite home
rebuilt from the export."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from klaw.memory.conversation_log import ConversationLog
from klaw.scheduling.names import task_chat
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"
DAY = "2026-03-01"  # the day of a_home's six messages


def _postgres_home(tmp_path: Path, dsn: str, *, keep_files: bool = False) -> Path:
    """A home moved into PostgreSQL by `klaw db migrate`, one row of log_records damaged by hand; its
    JSONL files removed unless `keep_files` (as the migration leaves them)."""
    home = a_home(tmp_path)
    moved = klaw_here(
        home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, "--samples", "0", env={VARIABLE: dsn}
    )
    assert moved.returncode == 0, moved.stdout + moved.stderr
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    if not keep_files:
        shutil.rmtree(home / "conversations")  # the log is the database's from now on
    (home / "klaw.db").unlink(missing_ok=True)
    with psycopg.connect(dsn, autocommit=True) as connection:  # a row damaged by hand
        connection.execute(
            "INSERT INTO log_records (id, chat, created_at, line) SELECT 'damaged', chat, created_at + 1,"
            ' \'{"role": "user", "content": "my pin is 1234"\' FROM log_records ORDER BY seq DESC LIMIT 1'
        )
    return home


def test_check_export_and_reindex_of_a_log_kept_in_postgres(tmp_path: Path, postgres_server: PgServer) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    env = {VARIABLE: dsn}
    home = _postgres_home(tmp_path, dsn)

    checked = klaw_here(home, "log", "check", env=env)

    assert checked.returncode == 1, checked.stdout + checked.stderr
    out = " ".join(checked.stdout.split())
    assert "console_me (log_records): 6 records" in out and "6 records, 1 malformed row(s)" in out, out
    assert f"log_records/{DAY}:7 (seq 7, chat console:me): invalid JSON" in out
    assert "1234" not in out + checked.stderr and "Traceback" not in checked.stderr

    target = tmp_path / "export"
    exported = klaw_here(home, "log", "export", "--to", str(target), env=env)

    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert "exported 6 records of 1 chat into" in exported.stdout and "1 malformed row" in exported.stdout
    [written] = list(target.rglob("*.jsonl"))
    assert written == target / "console_me" / f"{DAY}.jsonl"
    assert len(written.read_text(encoding="utf-8").splitlines()) == 7  # the damaged row kept, as it was
    assert oct(written.stat().st_mode & 0o777) == "0o600" and oct(written.parent.stat().st_mode & 0o777) == "0o700"
    again = klaw_here(home, "log", "export", "--to", str(target), env=env)
    assert again.returncode == 2 and "not an empty directory" in again.stderr
    assert again.stdout == "", again.stdout  # refused before any bar: nothing looked half-started

    rebuilt = klaw_here(home, "reindex", env=env)  # on PostgreSQL, from log_records
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "1 malformed log line(s) skipped" in rebuilt.stdout and f"  log_records/{DAY}:7" in rebuilt.stdout
    # the log is log_records, read a day at a time: no file (adversary23: "log files 1"; decision 442)
    said = " ".join(rebuilt.stdout.split())
    assert "│ days of the log (log_records) │ 1 (0 done by an earlier run) │" in said, said
    assert "reading the log" in rebuilt.stdout and "file" not in rebuilt.stdout

    sqlite_home = tmp_path / "back"  # the export is a log an SQLite home rebuilds from
    init_home(sqlite_home)
    (sqlite_home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    shutil.copytree(target, sqlite_home / "conversations", dirs_exist_ok=True)
    back = klaw_here(sqlite_home, "reindex")
    assert back.returncode == 0, back.stdout + back.stderr
    assert "1 malformed log line(s) skipped" in back.stdout
    assert any("messages" in line and line.rstrip(" │").endswith(" 6") for line in back.stdout.splitlines())


def test_a_row_filed_under_another_chat_is_malformed_for_check_and_reindex(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """A row whose chat column is another chat than its record names (edited by hand) was counted as
    the record's chat by `klaw log check` and rebuilt by `klaw reindex`, while an export filed it under
    the column's: malformed, as a record in another chat's folder is for the JSONL files."""
    dsn = postgres_server.dsn(new_database(postgres_server))
    env = {VARIABLE: dsn}
    home = _postgres_home(tmp_path, dsn)  # row 7: damaged JSON
    with psycopg.connect(dsn, autocommit=True) as connection:
        [(other,)] = connection.execute(
            "INSERT INTO chats (channel, chat_id) VALUES ('telegram', '42') RETURNING id"
        ).fetchall()
        [(line, created_at)] = connection.execute(
            "SELECT line, created_at FROM log_records WHERE id <> 'damaged' ORDER BY seq DESC LIMIT 1"
        ).fetchall()
        moved = {**json.loads(str(line)), "id": "filed-elsewhere"}  # still console:me's record
        connection.execute(
            "INSERT INTO log_records (id, chat, created_at, line) VALUES ('filed-elsewhere', %s, %s, %s)",
            (other, int(str(created_at)) + 2, json.dumps(moved)),
        )

    checked = klaw_here(home, "log", "check", env=env)

    out = " ".join(checked.stdout.split())
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "console_me (log_records): 6 records" in out and "6 records, 2 malformed row(s)" in out, out
    assert (
        f"log_records/{DAY}:8 (seq 8, chat telegram:42): its channel and chat_id are another chat's than its"
        " row's chat column (edited by hand?)" in out
    ), out

    rebuilt = klaw_here(home, "reindex", env=env)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "2 malformed log line(s) skipped" in rebuilt.stdout and f"log_records/{DAY}:8" in rebuilt.stdout
    assert any("messages" in line and line.rstrip(" │").endswith(" 6") for line in rebuilt.stdout.splitlines())


def test_check_reads_the_live_log_and_names_jsonl_files_left_from_before_the_move(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """Files a migration left are not the log: their damage is not reported as the log's, and one line
    says what they are; a scheduled task's run log, a file on every backend, is checked."""
    dsn = postgres_server.dsn(new_database(postgres_server))
    home = _postgres_home(tmp_path, dsn, keep_files=True)
    [stale] = list((home / "conversations" / "console_me").glob("*.jsonl"))
    with stale.open("ab") as handle:
        handle.write(b"{broken after the move\n")
    run = MessageRecord(task_chat("digest"), Role.USER, "sum up the day", created_at=datetime(2026, 3, 2, tzinfo=UTC))
    asyncio.run(ConversationLog(home / "conversations").append_many([run]))
    run_log = home / "conversations" / "scheduler_digest" / "2026-03-02.jsonl"
    with run_log.open("ab") as handle:
        handle.write(b"{broken run line\n")

    checked = klaw_here(home, "log", "check", env={VARIABLE: dsn})

    out = " ".join(checked.stdout.split())
    assert checked.returncode == 1, checked.stdout + checked.stderr  # log_records' damaged row, the run's line
    assert "console_me (log_records): 6 records" in out and "6 records, 1 malformed row(s)" in out, out
    assert "scheduler_digest: 1 records, 1 malformed lines" in out and f"{run_log}:2: invalid JSON" in out, out
    assert str(stale) not in out and "console_me: 6 records" not in out, out
    assert (
        f"{home / 'conversations'}: JSONL files of 1 chat(s) from before this home moved to PostgreSQL: not its"
        " log (log_records is) and not checked" in out
    ), out


def test_a_server_away_or_an_sqlite_home_give_one_clear_line(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    sqlite_export = klaw_here(home, "log", "export", "--to", str(tmp_path / "out"))
    assert sqlite_export.returncode == 2 and "JSONL files already" in sqlite_export.stderr
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    away = {VARIABLE: f"postgresql://klaw:hunter2@/klaw?host={tmp_path / 'no-server'}"}
    for command in (("log", "check"), ("log", "export", "--to", str(tmp_path / "out"))):
        result = klaw_here(home, *command, env=away)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"cannot reach the PostgreSQL server named by {VARIABLE}" in " ".join(result.stderr.split())
        assert "hunter2" not in result.stdout + result.stderr and "Traceback" not in result.stderr
    unset = klaw_here(home, "log", "check")
    assert unset.returncode == 2 and f"{VARIABLE} (database.urlEnv) is not set" in " ".join(unset.stderr.split())


def test_a_failure_names_the_variable_never_a_piece_of_its_value(tmp_path: Path, postgres_server: PgServer) -> None:
    """A server's error part-way (a database holding no klaw tables) names the variable urlEnv names, not
    the setting; a password of one character is masked like a longer one (decision 257)."""
    home = tmp_path / "home"
    init_home(home)
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  backend: postgres\n  urlEnv: {VARIABLE}\n",
        encoding="utf-8",
    )
    empty = "klaw_no_tables"
    postgres_server.admin(f"CREATE DATABASE {empty}")
    try:
        wrong = {VARIABLE: f"postgresql://postgres:hunter2@/{empty}?host={postgres_server.socket_dir}"}
        checked = klaw_here(home, "log", "check", env=wrong)
    finally:
        postgres_server.admin(f"DROP DATABASE {empty} WITH (FORCE)")
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert f'PostgreSQL ({VARIABLE}): relation "log_records" does not exist' in said, said
    assert "hunter2" not in checked.stdout + checked.stderr and "Traceback" not in checked.stderr

    malformed = {VARIABLE: "postgresql//klaw:x@db sslmode=require"}  # '//' without ':' and a space
    checked = klaw_here(home, "log", "check", env=malformed)
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 2 and f"the value of {VARIABLE} is not a PostgreSQL connection string" in said, said
    assert ":x@" not in checked.stdout + checked.stderr and "Traceback" not in checked.stderr


def test_check_names_hand_edited_records_in_log_records_as_in_the_files(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """Decision 500: the odd-record check (decision 488: a person's message over the cap, a record dated ahead,
    one id on two lines) covered the JSONL files alone; rows of log_records edited by hand are named the same
    (one id on two rows cannot be there: log_records.id is unique)."""
    from klaw.message_text import MAX_MESSAGE_CHARS
    from klaw.store.log_format import encode_record

    dsn = postgres_server.dsn(new_database(postgres_server))
    env = {VARIABLE: dsn}
    home = _postgres_home(tmp_path, dsn)  # row 7: damaged JSON
    chat = ChatRef("console", "me")
    huge = MessageRecord(chat, Role.USER, "x" * (2 * MAX_MESSAGE_CHARS), id="huge1")
    future = MessageRecord(
        chat, Role.USER, "hello from later", id="future1", created_at=datetime(9999, 12, 31, tzinfo=UTC)
    )
    with psycopg.connect(dsn, autocommit=True) as connection:
        [(chat_row, created_at)] = connection.execute(
            "SELECT chat, created_at FROM log_records WHERE id <> 'damaged' ORDER BY seq LIMIT 1"
        ).fetchall()
        for record, at in ((huge, int(str(created_at)) + 3), (future, int(future.created_at.timestamp() * 1000))):
            connection.execute(
                "INSERT INTO log_records (id, chat, created_at, line) VALUES (%s, %s, %s, %s)",
                (record.id, chat_row, at, encode_record(record)),
            )
    # one id on two rows cannot be: log_records.id is unique (the third of the file's checks has nothing to find)

    checked = klaw_here(home, "log", "check", env=env)

    out = " ".join(checked.stdout.split())
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "console_me (log_records): 8 records, 2 odd record(s)" in out, out
    assert f"record huge1: a person's message of {2 * MAX_MESSAGE_CHARS:,} characters" in out, out
    assert "record future1: dated 9999-12-31, in the future" in out, out
    assert "xxxxxxxxxx" not in checked.stdout + checked.stderr and "Traceback" not in checked.stderr
    # the day 9999-12-31 has no next: reading it for a rebuild ended in OverflowError, a traceback (decision 500)
    rebuilt = klaw_here(home, "reindex", env=env)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
