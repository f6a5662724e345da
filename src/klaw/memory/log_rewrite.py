"""Rewriting a conversation-log file without some records: the one exception to append-only.

`/forget` (and `klaw memory forget`) must leave no copy of the forgotten text on disk, so each day
file holding forgotten records is rewritten without their lines, atomically (`atomic_file`). The
`forget` tombstone record stays, listing ids only (`log_tombstones.py`). `ConversationLog.remove_records`
calls this under the chat's append lock.

Lines are matched by record id; a line that does not decode is kept as it is (it cannot be told
apart, and a torn line was never accepted as a record). A line longer than `MAX_RECORD_BYTES` (no reader
takes it) is matched by the id klaw writes first (`encode_record`): a 40 MiB reply of the program's own
model was stored so before every answer was capped, and a forget that said it erased it left it (decision 465).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import BinaryIO

from klaw import strict_json
from klaw.atomic_file import replace_file_by
from klaw.store.log_format import MAX_RECORD_BYTES

_PIECE = 1 << 20
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")  # a log file's stem; anything else is never turned into a path


def remove_lines(path: Path, ids: Collection[str]) -> int:
    """Rewrite `path` without the lines of the records `ids`; returns how many were removed (the
    file is not touched when none is). Read and written a line at a time, none held past
    `MAX_RECORD_BYTES`: a longer line is told by its head and copied in pieces when kept (decision 329).
    Blocking: run it in a thread."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - read on while the new file is written
    except FileNotFoundError:
        return 0
    with handle:
        wanted = [record_id.encode("utf-8") for record_id in ids]
        dropped: list[tuple[int, int]] = []  # (start, end) of each line removed
        start = 0
        for raw, whole in _lines_or_heads(handle):
            end = handle.tell()
            if (
                any(record_id in raw for record_id in wanted)
                and (_line_id(raw) if whole else _head_id(raw, ids)) in ids
            ):
                dropped.append((start, end))
            start = end
        if dropped:
            replace_file_by(path, lambda out: _copy_kept(handle, out, dropped, start))
    return len(dropped)


def _copy_kept(source: BinaryIO, out: BinaryIO, dropped: list[tuple[int, int]], size: int) -> None:
    position = 0
    for start, end in [*dropped, (size, size)]:
        source.seek(position)
        left = start - position
        while left > 0 and (piece := source.read(min(left, _PIECE))):
            out.write(piece)
            left -= len(piece)
        position = end


def _lines_or_heads(handle: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """Each line with its line end (True), or the first `MAX_RECORD_BYTES` + 1 bytes of a longer one (False),
    its rest passed over in pieces, never held (bounded_lines.py's rule, with the head kept)."""
    while line := handle.readline(MAX_RECORD_BYTES + 1):
        whole = len(line) <= MAX_RECORD_BYTES or line.endswith(b"\n")
        while not whole and (rest := handle.readline(_PIECE)) and not rest.endswith(b"\n"):
            pass
        yield line, whole


def _head_id(head: bytes, ids: Collection[str]) -> str | None:
    """The one of `ids` an over-long line begins with, as `encode_record` writes a record: its id first."""
    for record_id in ids:
        if head.startswith(b'{"id":' + json.dumps(record_id, ensure_ascii=False).encode("utf-8") + b","):
            return record_id
    return None


def _line_id(raw: bytes) -> str | None:
    try:
        data = strict_json.loads(raw)  # a line nested too deep must not stop /forget (RecursionError)
    except strict_json.StrictJsonError:
        return None
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def holds_lines(path: Path, ids: Collection[str]) -> bool:
    """Whether `path` still holds a line of one of the records `ids`, an over-long one included: what
    `remove_lines` would remove (read only). Blocking: run it in a thread."""
    return any(True for _ in _lines_of(path, ids))


def record_line(path: Path, record_id: str) -> bytes | None:
    """The line of the record `record_id` in `path` (None: none, or one too long to be read whole)."""
    return next((raw for raw, whole in _lines_of(path, [record_id]) if whole), None)


def _lines_of(path: Path, ids: Collection[str]) -> Iterator[tuple[bytes, bool]]:
    """The lines (or heads of over-long ones) of `path` that are records `ids`, as `remove_lines` tells them."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with handle:
        wanted = [record_id.encode("utf-8") for record_id in ids]
        for raw, whole in _lines_or_heads(handle):
            if (
                any(record_id in raw for record_id in wanted)
                and (_line_id(raw) if whole else _head_id(raw, ids)) in ids
            ):
                yield raw, whole
