"""A chat's message vectors read from PostgreSQL in COPY's binary format, straight into int8 rows.

Why binary COPY: loading a chat's copy (`vector_cache.py`) moves every one of its vectors from the
server once; as text, or as rows psycopg decodes one by one, 100k vectors of 384 floats cost seconds of
Python. In the binary format every row of (rowid, segment_id, created_at, embedding) has the same
size (the columns are NOT NULL and the embeddings of one bound dimension), so a block of rows is one
numpy structured array over the bytes as they arrive, quantized a block at a time: a large chat never
exists in klaw's memory as float32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from klaw.store.protocol import StorageError
from klaw.store.shared.vector_matrix import LOAD_BLOCK, ChatMatrix
from klaw.store.shared.vector_quant import quantize

SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
HEADER_BYTES = len(SIGNATURE) + 4 + 4  # the signature, the flags, the header extension's length
TRAILER = b"\xff\xff"
FIELDS = 4
COPY_SQL = (
    "COPY (SELECT rowid, segment_id, created_at, embedding FROM message_vectors WHERE chat = {chat}{only}"
    ") TO STDOUT (FORMAT BINARY)"
)


class CopyFormatError(StorageError):
    """The server's rows are not in the layout expected (another dimension, a NULL): the chat is not
    copied into memory, and the server's own scan searches it."""


def row_dtype(dim: int) -> np.dtype[np.void]:
    """One binary COPY row: a field count, then each field's length and value, big-endian. pgvector
    sends a vector as its dimension (int16), an unused int16 and the float4s."""
    return np.dtype(
        [
            ("fields", ">i2"),
            ("rowid_len", ">i4"),
            ("rowid", ">i8"),
            ("segment_len", ">i4"),
            ("segment", ">i8"),
            ("created_len", ">i4"),
            ("created", ">i8"),
            ("vector_len", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("values", ">f4", (dim,)),
        ]
    )


class CopyReader:
    """Feeds a binary COPY stream's bytes into a `ChatMatrix`, a block of whole rows at a time."""

    def __init__(self, dim: int, version: int, capacity: int) -> None:
        self.matrix = ChatMatrix.empty(capacity, dim, version)
        self._dtype = row_dtype(dim)
        self._dim = dim
        self._pending = bytearray()
        self._header_read = False

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._pending += data
        if not self._header_read:
            if len(self._pending) < HEADER_BYTES:
                return
            if bytes(self._pending[: len(SIGNATURE)]) != SIGNATURE:
                raise CopyFormatError("not a binary COPY stream")
            extension = int.from_bytes(self._pending[HEADER_BYTES - 4 : HEADER_BYTES], "big")
            if len(self._pending) < HEADER_BYTES + extension:
                return
            del self._pending[: HEADER_BYTES + extension]
            self._header_read = True
        self._take(LOAD_BLOCK)

    def finish(self) -> ChatMatrix:
        """The matrix once the stream ended: whatever rows are left, then its trailer (a field count of -1)."""
        self._take(1)
        if bytes(self._pending) != TRAILER:
            raise CopyFormatError("the binary COPY stream ended early")
        return self.matrix

    def _take(self, at_least: int) -> None:
        """Parse the whole rows received, once there are `at_least` (the 2-byte trailer, shorter than a
        row, is never taken for one)."""
        whole = len(self._pending) // self._dtype.itemsize
        if whole < at_least:
            return
        end = whole * self._dtype.itemsize
        rows = np.frombuffer(bytes(self._pending[:end]), dtype=self._dtype)
        del self._pending[:end]
        self._append(rows)

    def _append(self, rows: npt.NDArray[np.void]) -> None:
        expected = (FIELDS, 8, 8, 8, 4 + 4 * self._dim, self._dim)
        found = (
            rows["fields"],
            rows["rowid_len"],
            rows["segment_len"],
            rows["created_len"],
            rows["vector_len"],
            rows["dim"],
        )
        if any(bool((column != value).any()) for column, value in zip(found, expected, strict=True)):
            raise CopyFormatError("a row of another layout or dimension")
        meta = zip(rows["rowid"].tolist(), rows["segment"].tolist(), rows["created"].tolist(), strict=True)
        self.matrix.append_quantized(meta, *quantize(rows["values"].astype(np.float32)))
