"""A restored home read as klaw reads it, before it is given its name (home_restore.py, decision 522).

A restore that only unpacked files could hand over a home whose klaw.db does not open (a newer klaw's
schema, a damaged copy) and say nothing until the first start failed. Here the hidden folder the archive
was unpacked into is opened the way the engine opens it: engine.yaml loaded (with this shell's KLAW__
overrides, as a start here would), klaw.db opened through the store (brought to this klaw's schema, as
the first start would do anyway), the conversation log read by `klaw log check`'s reader (a malformed
line counted, as it skips it), scheduler.db's tasks listed, the skills' SKILL.md files counted. A
database that does not open refuses the restore; everything else is counted for the report.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from klaw.home import KlawHome

if TYPE_CHECKING:
    from klaw.config import DatabaseConfig


@dataclass
class RestoredCounts:
    config_error: str | None = None  # engine.yaml does not load with this klaw: why
    postgres: bool = False
    url_env: str = ""
    sandbox_backend: str = "auto"
    database_path: str = ""  # database.path as engine.yaml has it
    database_outside: bool = False  # database.path is absolute: the archive's copy is in outside-home/
    chats: int | None = None  # None: not read (PostgreSQL, no klaw.db yet, engine.yaml not loading)
    messages: int | None = None
    log_chats: int = 0
    log_records: int = 0
    malformed_lines: int = 0
    tasks: int = 0
    skills: int = 0


def check_restored(root: Path, database_member: str | None) -> RestoredCounts:
    """What the home unpacked at `root` holds; `RestoreError` when its database does not open."""
    from klaw.config_loader import ConfigError, load_config

    home = KlawHome(root)
    counts = RestoredCounts()
    try:
        config = load_config(home.config_file).config
    except ConfigError as exc:
        counts.config_error = str(exc)
        config = None
    if config is not None:
        database = config.database
        counts.postgres, counts.url_env = database.backend == "postgres", database.url_env or "KLAW_DATABASE_URL"
        counts.sandbox_backend, counts.database_path = config.sandbox.backend, database.path
        path = home.database_file(database.path)
        if not counts.postgres and not _inside(path, root):  # absolute, or `../` climbing out of the home
            counts.database_outside = True
            path = root / database_member if database_member else path
        if not counts.postgres and _inside(path, root) and path.is_file():
            counts.chats, counts.messages = asyncio.run(_store_counts(path.resolve(), database))
    _read_log(home, counts)
    _read_tasks(home, counts)
    counts.skills = len(list(home.skills_dir.glob("*/SKILL.md")))
    return counts


def _inside(path: Path, root: Path) -> bool:
    """`path`, its links and `..` followed, is below `root`: only the restored folder's own files are opened
    (decision 531: a manifest's `../../vh/klaw.db` opened another home's klaw.db and counted its messages)."""
    return path.resolve().is_relative_to(root.resolve())


async def _store_counts(path: Path, database: DatabaseConfig) -> tuple[int, int]:
    from klaw.home_restore import RestoreError
    from klaw.log_format import held_back
    from klaw.store.backend import open_storage
    from klaw.store.protocol import StorageError

    quiet = database.model_copy(update={"vector_cache_mb": 0})  # no vector copies saved beside it
    try:
        with held_back("klaw.store.shared.migrations"):  # "migrated" would name the hidden folder's file
            store = await open_storage(path, quiet)
    except StorageError as exc:
        raise RestoreError(
            f"the archive's {path.name} does not open: {exc}. Nothing was restored. Its conversation log may"
            " still be whole: unpack it by hand (docs/maintenance.md, 'Restoring by hand'), remove klaw.db and"
            " run klaw reindex, which rebuilds it from the log"
        ) from None
    try:
        found = await store.counts()
    finally:
        await store.aclose()
    return found.chats, found.messages


def _read_log(home: KlawHome, counts: RestoredCounts) -> None:
    """The log's chats and records through `klaw log check`'s reader; its malformed lines counted."""
    from klaw.log_format import held_back
    from klaw.memory.conversation_log import ConversationLog

    log = ConversationLog(home.conversations)
    with held_back("klaw.memory.conversation_log"):  # counted here; `klaw log check` names each
        for chat_dir in log.chat_dirs():
            report = asyncio.run(log.read(log.files(chat_dir)))
            counts.log_chats += 1
            counts.log_records += len(report.records)
            counts.malformed_lines += len(report.skipped)


def _read_tasks(home: KlawHome, counts: RestoredCounts) -> None:
    from klaw.home_restore import RestoreError
    from klaw.scheduling.task_store import SchedulerFileTooNew, ScheduleStore

    if not home.scheduler_db.is_file():
        return
    try:
        counts.tasks = len(ScheduleStore(home.scheduler_db).list_read_only())
    except SchedulerFileTooNew as exc:
        raise RestoreError(f"the archive's {exc}; nothing was restored") from None
    except sqlite3.Error as exc:
        raise RestoreError(f"the archive's scheduler.db does not open ({exc}): nothing was restored") from None
