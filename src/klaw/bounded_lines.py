"""A file's lines read one at a time, none held past a bound: the one way klaw reads its JSONL files.

`for raw in handle` reads a line whole, however long: a conversation log with one 300 MB line (a damaged
file, or one written by hand) took `klaw log check` to 1.2 GB of memory. Here each line is read with
`readline(max_bytes + 1)`: a line longer than `max_bytes` is passed over in bounded pieces and given
as `None`, its number kept, so the caller reports it as malformed and goes on (decision 329). At C speed
for ordinary lines, as before.

Imports nothing of klaw: the log's readers (memory) and the gateway's buffer use it alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

_SKIP_PIECE = 1 << 16


def numbered_lines(handle: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number from 1, the line with its line end) for each line of `handle`; None in place of a
    line longer than `max_bytes` (its line end not counted), which is skipped without being held."""
    number = 0
    while line := handle.readline(max_bytes + 1):
        number += 1
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while (rest := handle.readline(_SKIP_PIECE)) and not rest.endswith(b"\n"):
                pass
            yield number, None
        else:
            yield number, line


def holds(handle: BinaryIO, mark: bytes, piece: int = 1 << 20) -> bool:
    """Whether `mark` occurs in the rest of `handle`, read a piece at a time (a piece and the mark's
    length held at most)."""
    tail = b""
    while data := handle.read(piece):
        if mark in tail + data[: len(mark)] or mark in data:
            return True
        tail = data[-(len(mark) - 1) :] if len(mark) > 1 else b""
    return False
