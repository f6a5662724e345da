"""What the log's `forget` tombstones forgot: ids that recovery and `klaw reindex` must never bring back.

`/forget` rewrites the log without the forgotten lines (`log_rewrite.py`), but a crash between the
tombstone and the rewrite, or a copy of the log restored from a backup, can still hold them. The
tombstone, which lists ids only, travels with the log, so every rebuild skips those records.
"""

from __future__ import annotations

from collections.abc import Iterator

from klaw.bounded_lines import holds
from klaw.memory.conversation_log import ConversationLog, ReadReport, iter_file
from klaw.store.archival_records import forgotten_ids
from klaw.store.records import MessageRecord

# How a tombstone's type is written by log_format.encode_record (compact separators): a file without
# this text holds no tombstone and is not decoded at all.
_TOMBSTONE_MARK = b'"type":"forget"'


def forgotten_in_log(log: ConversationLog) -> frozenset[str]:
    """Every id named by a tombstone anywhere in the chats' logs (blocking: run it in a thread)."""
    found: set[str] = set()
    for record in _tombstones(log):
        found |= forgotten_ids(record)
    return frozenset(found)


def _tombstones(log: ConversationLog) -> Iterator[MessageRecord]:
    report = ReadReport()
    for chat_dir in log.chat_dirs():
        for path in log.files(chat_dir):
            with open(path, "rb") as handle:
                if not holds(handle, _TOMBSTONE_MARK):  # a piece at a time: a file is never held whole
                    continue
            yield from iter_file(path, report)
