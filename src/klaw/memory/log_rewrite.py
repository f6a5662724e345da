"""Rewriting a conversation-log file without some records: the one exception to append-only.

`/forget` (and `klaw memory forget`) must leave no copy of the forgotten text on disk, so each day
file holding forgotten records is rewritten without their lines, atomically (`atomic_file`). The
`forget` tombstone record stays, listing ids only (`log_tombstones.py`). `ConversationLog.remove_records`
calls this under the chat's append lock.

Lines are matched by record id; a line that does not decode is kept as it is (it cannot be told
apart, and a torn line was never accepted as a record).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from klaw import strict_json
from klaw.atomic_file import replace_file

DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")  # a log file's stem; anything else is never turned into a path


def remove_lines(path: Path, ids: Collection[str]) -> int:
    """Rewrite `path` without the lines of the records `ids`; returns how many were removed (the
    file is not touched when none is). Blocking: run it in a thread."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    wanted = [record_id.encode("utf-8") for record_id in ids]
    if not any(record_id in data for record_id in wanted):
        return 0
    kept: list[bytes] = []
    removed = 0
    for raw in data.splitlines(keepends=True):
        if any(record_id in raw for record_id in wanted) and _line_id(raw) in ids:
            removed += 1
        else:
            kept.append(raw)
    if removed:
        replace_file(path, b"".join(kept))
    return removed


def _line_id(raw: bytes) -> str | None:
    try:
        data = strict_json.loads(raw)  # a line nested too deep must not stop /forget (RecursionError)
    except strict_json.StrictJsonError:
        return None
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None
