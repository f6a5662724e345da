"""The SQLite copy `klaw db migrate` leaves in a home it moved into PostgreSQL (klaw.db and the chats'
JSONL files under conversations/), reached by every forget there (decision 539).

Decision 394 named the copy in a forget's answer and left it: "Not reached: … delete that copy". newcomer24
forgot a segment on a migrated home, then `klaw backup` packed klaw.db and the chat's JSONL files with the
forgotten text in them, while the backup said the archive held none of the memory. A forget's promise has to
hold whatever the backend, so a forget on a PostgreSQL home now erases the same records from the copy: the
chat's JSONL files are rewritten without their lines (as on SQLite, `log_rewrite.remove_lines`), and a klaw.db
holding any of them is deleted whole (it is derived: `klaw reindex` rebuilds it from those files on a home
moved back to SQLite). A klaw.db holding none of them is left. Scheduled tasks' run logs are not the copy:
they stay the files of the PostgreSQL home (docs/postgres.md) and the forget's own log rewrite covers them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from klaw.config import DatabaseConfig
from klaw.home import KlawHome
from klaw.memory.log_rewrite import remove_lines
from klaw.scheduling.names import is_task_log_dir
from klaw.store.records import ChatRef


@dataclass(frozen=True)
class MigratedCopy:
    """A home's SQLite copy, when its memory is in PostgreSQL; `erase` does nothing on an SQLite home."""

    home: KlawHome
    database: DatabaseConfig

    def erase(self, chat: ChatRef, record_ids: Collection[str]) -> str:
        """Erase `record_ids` of `chat` from the copy; the sentence saying what it held and what was done
        (empty when there is no copy or it held none of them). Blocking: run it in a thread."""
        if self.database.backend != "postgres" or not record_ids:
            return ""
        from klaw.store.sqlite.left_copy import holds_any, remove_copy

        rewritten = [path for path in _chat_files(self.home.conversations, chat) if remove_lines(path, record_ids)]
        sqlite_file = self.home.database_file(self.database.path)
        deleted = holds_any(sqlite_file, record_ids)
        if deleted:
            remove_copy(sqlite_file)
        done: list[str] = []
        if rewritten:
            done.append(
                f"{len(rewritten)} of its JSONL log file(s) under {self.home.conversations} rewritten without it"
            )
        if deleted:
            done.append(
                f"its {sqlite_file} deleted (with its side files), as it held it: on a home moved back to SQLite"
                " 'klaw reindex' builds it again from the JSONL files"
            )
        if not done:
            return ""
        return f" The SQLite copy 'klaw db migrate' left in this home held it too: {'; '.join(done)}."


def _chat_files(conversations: Path, chat: ChatRef) -> list[Path]:
    """The day files of `chat` the migrate left (a scheduled task's run logs are not the copy)."""
    folder = conversations / chat.log_dir_name
    if is_task_log_dir(folder.name) or not folder.is_dir():
        return []
    return sorted(path for path in folder.glob("*.jsonl") if path.is_file())
