"""A chat's int8 vectors saved beside klaw.db, so a start loads a large chat in about a second
instead of scanning `vec_messages` (36 s for one chat of 1M vectors).

Files: `<klaw.db>.vectors/chat-<key>/`, one `.npy` per array and `stamp.json` (folders 0700,
files 0600), written under a temporary name and renamed, so a crash leaves a whole copy or none.
They are mapped from disk rather than read: loading costs nothing, a search reads the pages it
touches (from the page cache after the first), and the first append after a start copies the
matrix into memory as it grows. Each copy names its `Stamp`: the embedder
and the moment `vec_messages` was bound to it (a reindexed or rebound table is another table) and
the chat's version in `vector_marks` (migration 0009), which every insert and every forget in the
chat raises in its own transaction. A file whose stamp is not the database's current one is stale:
the chat is loaded from `vec_messages` again, and the file rewritten. So is one whose sampled rows
are not the table's (`agrees_with_table`). `vec_messages` stays the source of truth; a file that
cannot be read is treated as stale, never as an error.

Forgetting in a chat deletes its file at once (it holds quantized vectors of what was forgotten).
Only chats of at least `SNAPSHOT_MIN_ROWS` vectors are saved: a smaller one loads from the table
in well under a second.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeAlias

import apsw

from klaw.private_files import open_private, private_dirs
from klaw.store.sqlite.query import fetch_one, fetch_value

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

SNAPSHOT_MIN_ROWS = 20_000
CHECKED_ROWS = 16  # rows of a saved copy compared with the table when it is loaded
ARRAYS = ("codes", "scales", "rowids", "segments", "created")
STAMP_FILE = "stamp.json"
Arrays: TypeAlias = "dict[str, npt.NDArray[np.generic]]"


@dataclass(frozen=True)
class Stamp:
    """What a saved copy must match to be current: the table's binding and the chat's version."""

    embedder_id: str
    dim: int
    bound_at: int
    version: int


def current_stamp(connection: apsw.Connection, table: str, chat_key: int) -> Stamp | None:
    """The stamp a current copy of the chat's vectors in `table` carries (None: the table is unbound)."""
    meta = fetch_one(connection, "SELECT embedder_id, dim, created_at FROM index_meta WHERE table_name = ?", (table,))
    if meta is None:
        return None
    return Stamp(str(meta[0]), int(meta[1]), int(meta[2]), chat_version(connection, chat_key))


def agrees_with_table(connection: apsw.Connection, table: str, arrays: Arrays) -> bool:
    """Whether a saved copy's rows are in rowid order and `CHECKED_ROWS` of them, spread over it,
    are the table's: codes and scale those of the row's vector in `table`, segment and time its
    message's. A copy whose stamp matches can still be wrong (a file put back from another home, a
    disk error that kept the shape): it is then rebuilt from the table rather than trusted (decision 236)."""
    import numpy as np

    from klaw.store.shared.vector_quant import quantize

    rowids = np.asarray(arrays["rowids"], dtype=np.int64)
    if len(rowids) > 1 and not bool(np.all(rowids[1:] > rowids[:-1])):
        return False
    for i in np.unique(np.linspace(0, len(rowids) - 1, min(CHECKED_ROWS, len(rowids))).astype(np.intp)):
        rowid = int(rowids[i])
        vector = fetch_value(connection, f"SELECT embedding FROM {table} WHERE rowid = ?", (rowid,))
        meta = fetch_one(connection, "SELECT segment_id, created_at FROM messages WHERE rowid = ?", (rowid,))
        if vector is None or meta is None:
            return False
        codes, scales = quantize(np.frombuffer(vector, dtype=np.float32))
        saved = (arrays["codes"][i], arrays["scales"][i], arrays["segments"][i], arrays["created"][i])
        # Codes within one step: copies saved before decision 236 rounded by dividing, not multiplying.
        close = int(np.abs(codes[0].astype(np.int16) - np.asarray(saved[0], dtype=np.int16)).max()) <= 1
        if not (close and scales[0] == saved[1] and (saved[2], saved[3]) == meta):
            return False
    return True


def chat_version(connection: apsw.Connection, chat_key: int) -> int:
    version = fetch_value(connection, "SELECT version FROM vector_marks WHERE chat_key = ?", (chat_key,))
    return int(version or 0)


def bump_version(connection: apsw.Connection, chat_key: int) -> int:
    """Note a change to the chat's vectors (call inside the transaction that makes it); the new version."""
    connection.execute(
        "INSERT INTO vector_marks (chat_key, version) VALUES (?, 1)"
        " ON CONFLICT (chat_key) DO UPDATE SET version = version + 1",
        (chat_key,),
    )
    return chat_version(connection, chat_key)


class SnapshotFolder:
    """The saved copies of one database's chats (see module doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def beside(cls, database: Path) -> SnapshotFolder:
        return cls(database.with_name(database.name + ".vectors"))

    def chat(self, chat_key: int) -> Path:
        """The chat's copy: a folder of one `.npy` file per array and `stamp.json`."""
        return self.path / f"chat-{chat_key}"

    def save(self, chat_key: int, stamp: Stamp, arrays: Arrays) -> None:
        """Write the chat's copy under `stamp`, replacing any older one; a failure is logged and
        leaves the table as the only copy (the next start loads from it)."""
        import numpy as np

        target = self.chat(chat_key)
        partial = target.with_name(target.name + ".partial")
        try:
            private_dirs(self.path)
            _remove_tree(partial)
            private_dirs(partial)
            for name in ARRAYS:
                with _private(partial / f"{name}.npy") as out:
                    np.save(out, arrays[name], allow_pickle=False)
            with _private(partial / STAMP_FILE) as out:
                out.write(json.dumps(asdict(stamp)).encode())
            _remove_tree(target)
            os.replace(partial, target)
        except OSError as exc:
            log.warning("could not save the vectors of chat %s beside the database (%s)", chat_key, exc)
            _remove_tree(partial)

    def load(self, chat_key: int, stamp: Stamp) -> Arrays | None:
        """The chat's saved arrays, mapped from disk read-only (pages are read as a search touches
        them), when the copy carries exactly `stamp`; None when missing, stale or unreadable."""
        import numpy as np

        folder = self.chat(chat_key)
        try:
            saved = Stamp(**json.loads((folder / STAMP_FILE).read_bytes()))
            if saved != stamp:
                return None
            arrays: Arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in ARRAYS}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("saved vectors of chat %s unreadable (%s): loading them from the database", chat_key, exc)
            return None
        rows = len(arrays["rowids"])
        if arrays["codes"].shape != (rows, stamp.dim) or any(len(arrays[name]) != rows for name in ARRAYS):
            log.warning("saved vectors of chat %s do not fit together: loading them from the database", chat_key)
            return None
        return arrays

    def replace(self, other: SnapshotFolder) -> None:
        """Put these copies in `other`'s place (`klaw reindex` swapping its build in), dropping
        `other`'s: they were saved for the database being replaced."""
        _remove_tree(other.path)
        if self.path.exists():
            os.replace(self.path, other.path)

    def remove(self, chat_key: int | None = None) -> None:
        """Delete the chat's copy (every copy, and the folder, when None)."""
        _remove_tree(self.chat(chat_key) if chat_key is not None else self.path)


def _private(path: Path) -> BinaryIO:
    """`path` opened for writing, readable by its owner only (0600) from the moment it exists."""
    return os.fdopen(open_private(path, os.O_WRONLY | os.O_TRUNC), "wb")


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
