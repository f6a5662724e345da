"""newcomer24 (decision 539, item 4): on a home moved into PostgreSQL, `klaw memory forget segment 1 --yes`
then `klaw backup` packed klaw.db and the chat's JSONL files the migrate had left, with the forgotten text in
them (`grep -rl` found it in both), while the backup said the archive held none of the memory. Real
PostgreSQL, a real home, the real commands; the archive is unpacked and searched as the person did."""

from __future__ import annotations

import tarfile
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_migrated_home_words import VARIABLE, _moved, _said
from tests.pg_server import PgServer


def _members_holding(archive: Path, word: str) -> list[str]:
    with tarfile.open(archive) as packed:
        return [
            member.name
            for member in packed.getmembers()
            if member.isfile() and word.encode() in (packed.extractfile(member) or open("/dev/null", "rb")).read()
        ]


def test_a_forget_then_a_backup_leaves_no_forgotten_word_in_the_archive(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    home, env, _ = _moved(tmp_path, postgres_server)
    runs = home / "conversations" / "scheduler_bees"  # a task's run log is the home's own: it stays in
    runs.mkdir(mode=0o700)
    (runs / "2026-11-28.jsonl").write_text("{}\n", encoding="utf-8")
    forgot = klaw_here(home, "memory", "forget", "segment", "1", "--yes", env=env)
    assert forgot.returncode == 0, forgot.stderr

    backed = klaw_here(home, "backup", str(tmp_path / "bk.tgz"), env=env)

    assert backed.returncode == 0, backed.stderr
    assert _members_holding(tmp_path / "bk.tgz", "lighthouse") == []
    with tarfile.open(tmp_path / "bk.tgz") as packed:
        names = packed.getnames()
    assert "conversations/scheduler_bees/2026-11-28.jsonl" in names and "klaw.db" not in names, names
    assert not [name for name in names if name.startswith("klaw.db")], names  # nor its float vectors (544)
    assert "the archive holds none of them" in _said(backed.stderr)


def test_a_backup_of_a_migrated_home_leaves_the_sqlite_copy_out_and_names_it(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    """Nothing forgotten: the copy still holds every message from before the move; the archive holds none of
    it, as its words say, and the report names what it left out."""
    home, env, _ = _moved(tmp_path, postgres_server)
    assert (home / "klaw.db").exists() and (home / "klaw.db.floats").exists()  # the float vectors (decision 534)

    backed = klaw_here(home, "backup", str(tmp_path / "bk.tgz"), env={**env, "COLUMNS": "400"})

    assert backed.returncode == 0, backed.stderr
    assert _members_holding(tmp_path / "bk.tgz", "lighthouse") == []
    with tarfile.open(tmp_path / "bk.tgz") as packed:
        assert not [name for name in packed.getnames() if name.startswith("klaw.db")]  # the floats too (544)
    said = _said(backed.stdout)
    assert "conversations/console_me" in said and "klaw.db" in said, said
    assert "(the SQLite copy 'klaw db migrate' left: this home's memory is in PostgreSQL)" in said, said
    assert f"PostgreSQL database named by {VARIABLE}" not in said  # pg_dump's words name the variable on stderr
    assert f'"${{{VARIABLE}}}"' in backed.stderr or VARIABLE in backed.stderr
