"""Which log files start-up recovery reads: those written since the store last agreed with the log.

A record is logged (and fsync'd) before its row is stored, so a crash in between leaves a line the
database lacks; `Ingestion.recover` stores those at the next start. It used to read every chat's newest
file and ask the store about each chat: 13 ms a chat, 40 s to start a home of 3,000 idle chats
(adversary27, decision 477). The store now keeps a watermark (`RECOVERED_KEY`, milliseconds of the wall
clock) of a moment when every line logged before it was stored: written once recovery has run at start
(nothing was logged meanwhile) and at a clean close once every accept has ended and none is left logged
but not stored. A file not modified since was read by an earlier recovery or written while the store
took each of its lines, so only files modified since (less `MTIME_SLACK`: a file system's coarse mtime,
a clock stepped back a little) are read, and a chat the store has never heard of is read whole, as
before. Finding them is a listing of the log's folders, with no file opened and no query per chat.
A wall clock stepped back further during a run (NTP correcting a Pi without a clock chip) would give
the files it writes mtimes before the watermark: `Ingestion` lowers the watermark to now, durably,
before it logs a line while the clock is behind it (decision 486), so the watermark is never later
than a line logged since.

A store without the watermark (a new one, a home from before decision 477, a rebuilt one) is recovered
as before, chat by chat, then has one.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from klaw.memory.conversation_log import ConversationLog

RECOVERED_KEY = "log.recovered_at"  # in the store's settings: its log agreed with it then (ms since the epoch)
MTIME_SLACK = timedelta(seconds=10)


@dataclass(frozen=True)
class ChatFiles:
    chat_dir: Path
    files: list[Path]  # oldest first
    whole: bool  # every file of a chat the store does not know, not only the changed ones


def watermark(value: object) -> int | None:
    """The stored watermark, None if there is none or it is not one this module wrote."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def changed_files(log: ConversationLog, since_ms: int, known_dirs: Collection[str]) -> list[ChatFiles]:
    """The chats with log files to read (blocking: run it in a thread): of a chat whose folder name is
    not in `known_dirs`, every file; of the others, the files modified at or after `since_ms` less the
    slack. Chats with none are left out, so the work after this is that of the chats written to."""
    since_ns = since_ms * 1_000_000 - int(MTIME_SLACK.total_seconds() * 1_000_000_000)
    found: list[ChatFiles] = []
    for chat_dir in log.chat_dirs():
        whole = chat_dir.name not in known_dirs
        files = sorted(_changed(chat_dir, 0 if whole else since_ns))
        if files:
            found.append(ChatFiles(chat_dir, files, whole))
    return found


def _changed(chat_dir: Path, since_ns: int) -> list[Path]:
    """The chat's log files (`<day>.jsonl`, as `ConversationLog.files` lists them) modified since `since_ns`."""
    try:
        with os.scandir(chat_dir) as entries:
            return [Path(entry.path) for entry in entries if _day_file(entry) and entry.stat().st_mtime_ns >= since_ns]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _day_file(entry: os.DirEntry[str]) -> bool:
    return entry.name.endswith(".jsonl") and not entry.name.startswith(".") and entry.is_file()
