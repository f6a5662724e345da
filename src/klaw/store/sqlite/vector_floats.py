"""Message vectors as float32 rows in a file beside klaw.db, read by the exact rescore.

Why: a large chat's int8 shortlist (40 rows) is rescored with the exact float vectors. Read from
`vec_messages` that is 40 vec0 point lookups, each walking its 196 KB chunk blob's overflow pages
through a page cache every commit empties: ~2.3 ms of a read thread a search at 100k messages
(decisions 498, 518). From this file it is 40 `pread`s of 1.5 KB (decision 534).

Format: `<klaw.db>.floats`, 0600: a 4 KiB header (`MAGIC`, then JSON naming the binding of
`vec_messages` it holds: embedder, dim, the moment it was bound), then records appended in the
order vectors are stored, each the message's rowid (int64) and its `dim` float32. Beside it
`<klaw.db>.floats-rowids` (0600): each record's rowid (int64), in the same order, read whole when
the file is opened to know where a rowid's record is (800 KB at 100k vectors, where reading the
records' own rowids would read the whole file; `RecordIndex`). Keyed by rowid, append-only: a message whose
vector is stored again (a repair, a rowid used again) is written over its record. The database
stays the truth:

- A put writes its records inside its transaction, before the commit: a committed vector's record
  was written first (a rolled-back put leaves a record no search asks for: only committed rows
  reach the int8 copies a shortlist comes from; its retry writes it again).
- Deleting a message (forget; any delete of `messages` on the writer) zeroes its record (rowid and
  floats) from a TEMP trigger in the same transaction, and both files are fdatasync'd before that
  transaction commits: no forgotten vector stays in the file once its forget is committed, even
  across a power cut. Its place is not reused (a forget is rare; `klaw reindex` writes a file
  without them).
- Every record read is checked: its own rowid must be the one asked for, and quantized again its
  floats must score exactly the int8 score the shortlist gave it (`checked`: it is the row the
  int8 copy was made from). A record that is missing, zero (a write lost to a power cut, a slot
  erased by a forget that was rolled back) or disagreeing (a damaged or foreign file) is read from
  `vec_messages` instead, as before this file, so hits and distances are the table's whatever the
  file holds. Such rows are rewritten from the table later on the database thread (`repair`), the
  single writer, so a repair never races a forget.
- After a crash the two files may disagree in length: records past the rowid list's end have their
  rowids read from the records themselves; list entries past the last whole record are dropped.
- A file that is missing, unreadable, or another binding's is replaced by an empty one when the
  table is bound (a log line names the file and why, no content); it fills as vectors are stored and
  as searches repair the rows they read. `klaw reindex` builds its own beside its build and moves it
  with the database (rebuild.py). It is read with `pread`, never mapped: a page the disk cannot give
  is then an error answered from the table, not a SIGBUS that ends the engine (decision 273).
"""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import struct
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from klaw.private_files import open_private
from klaw.store.sqlite.float_index import RecordIndex
from klaw.store.sqlite.query import fetch_all

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

HEADER_BYTES = 4096
MAGIC = b"klaw-floats 1\n"
ROWIDS_SUFFIX = "-rowids"
_ERASE = "klaw_float_erase"
_ROWID = struct.Struct("<q")


@dataclass(frozen=True)
class Binding:
    """Which vectors the file holds: `vec_messages`' embedder, dim and the moment it was bound."""

    embedder_id: str
    dim: int
    bound_at: int


class FloatFile:
    """The float rows beside one klaw.db (see module doc). Written on the database thread only;
    read on any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rowids_path = path.with_name(path.name + ROWIDS_SUFFIX)
        self._fd: int | None = None  # the records: written by the database thread, read with pread by any
        self._rowids_fd: int | None = None
        self._dim = 0  # of the open file, from its header
        self._where = RecordIndex()  # rowid -> record number
        self._records = 0  # records in the file
        self._binding: Binding | None = None  # set once the file is the table's: reads allowed
        self._lock = threading.Lock()  # the repair queue
        self._erased = False  # records zeroed in the open transaction: fdatasync before it commits
        self._to_repair: set[int] = set()
        self._repaired: set[int] = set()  # repaired once: not queued again (module doc)
        self._warned = False

    @classmethod
    def beside(cls, database: Path) -> FloatFile:
        return cls(database.with_name(database.name + ".floats"))

    def paths(self) -> tuple[Path, Path]:
        return self.path, self.rowids_path

    # -- the database thread -------------------------------------------------------------------

    def attach(self, connection: apsw.Connection) -> None:
        """At open, on the writer: the trigger that zeroes a deleted message's record, the commit hook
        that makes it durable first, and an existing file opened so its records can be erased before
        the table is bound. A file whose header cannot be read is deleted (it is only a copy)."""
        connection.create_scalar_function(_ERASE, self._erase, 1, deterministic=False)
        connection.execute(
            f"CREATE TEMP TRIGGER IF NOT EXISTS {_ERASE} AFTER DELETE ON main.messages"
            f" BEGIN SELECT {_ERASE}(old.rowid); END"
        )
        connection.set_commit_hook(self._before_commit)
        binding, reason = self._header()
        if binding is None and reason == "damaged":
            log.warning("the float vectors file %s is damaged: removed, it is filled again", self.path.name)
            self.remove()
        elif binding is not None:
            self._open(binding.dim)

    def bind(self, binding: Binding) -> None:
        """The file made to hold `binding`'s vectors: kept when its header says so, else replaced by
        an empty one (a log line names the file and why). Reads are allowed from here on."""
        if self._binding == binding:
            return
        found, reason = self._header()
        if found != binding:
            if found is not None:
                reason = "another embedder's or an older table's"
            self._create(binding)
            log.info(
                "the float vectors file %s was %s: started again, filled as vectors are stored", self.path.name, reason
            )
        elif self._fd is None:
            self._open(binding.dim)
        if self._fd is not None:
            self._binding = binding

    def write(self, rows: Iterable[tuple[int, npt.NDArray[np.float32]]]) -> None:
        """Rows' records (inside the put's transaction, before its commit): over the rowid's record, or
        appended. A failed write is logged: the record then disagrees or is missing, and the search
        reads the table instead."""
        import numpy as np

        if self._fd is None or self._rowids_fd is None or self._binding is None:
            return
        try:
            for rowid, vector in rows:
                data = np.ascontiguousarray(vector, dtype="<f4").tobytes()
                if len(data) != self._dim * 4 or rowid <= 0:
                    continue
                number = self._where.get(rowid)
                if number is None:
                    number = self._records
                    os.pwrite(self._fd, _ROWID.pack(rowid) + data, self._offset(number))
                    os.pwrite(self._rowids_fd, _ROWID.pack(rowid), number * 8)
                    self._records += 1
                    self._where.put(rowid, number)
                else:
                    os.pwrite(self._fd, _ROWID.pack(rowid) + data, self._offset(number))
        except OSError as exc:
            self._warn(f"could not write to the float vectors file {self.path.name} ({exc.strerror})")

    def repair(self, connection: apsw.Connection, table: str) -> int:
        """Rewrite from `table` the records searches found missing or disagreeing (on the database
        thread, the single writer: a forget in between has zeroed the record and its row is gone).
        Returns how many were written."""
        with self._lock:
            wanted, self._to_repair = sorted(self._to_repair), set()
        return self.copy(connection, table, wanted)

    def unlisted(self, connection: apsw.Connection, table: str) -> list[int]:
        """The rowids of `table`'s vectors the file has no record of (what `copy` fills in after the
        file was started again; on the database thread)."""
        if self._fd is None or self._binding is None:
            return []
        return [
            int(r)
            for (r,) in fetch_all(connection, f"SELECT rowid FROM {table}_rowids")
            if self._where.get(int(r)) is None
        ]

    def copy(self, connection: apsw.Connection, table: str, rowids: Sequence[int]) -> int:
        """`rowids`' vectors as `table` holds them now written to their records (on the database
        thread); how many."""
        if not rowids or self._fd is None or self._binding is None:
            return 0
        import numpy as np

        rows = fetch_all(
            connection,
            f"SELECT v.rowid, v.embedding FROM json_each(?) AS j JOIN {table} AS v ON v.rowid = j.value",
            (json.dumps(list(rowids)),),
        )
        self.write((int(rowid), np.frombuffer(blob, dtype=np.float32)) for rowid, blob in rows)
        return len(rows)

    def close(self) -> None:
        self._binding = None
        for descriptor in (self._fd, self._rowids_fd):
            if descriptor is not None:
                with contextlib.suppress(OSError):
                    os.close(descriptor)
        self._fd = self._rowids_fd = None
        self._where, self._records = RecordIndex(), 0

    def remove(self) -> None:
        """Close and delete both files (a damaged copy; a build discarded)."""
        self.close()
        for path in self.paths():
            path.unlink(missing_ok=True)

    def _offset(self, number: int) -> int:
        return HEADER_BYTES + number * (8 + self._dim * 4)

    def _erase(self, *args: apsw.SQLiteValue) -> None:
        """The trigger's: zero a deleted message's record and its rowid entry (in its transaction)."""
        rowid = args[0]
        if not isinstance(rowid, int) or self._fd is None or self._rowids_fd is None:
            return
        number = self._where.get(rowid)
        if number is None:
            return
        self._where.drop(rowid)
        try:
            os.pwrite(self._fd, bytes(8 + self._dim * 4), self._offset(number))
            os.pwrite(self._rowids_fd, bytes(8), number * 8)
            self._erased = True
        except OSError as exc:
            self._warn(f"could not erase a row of the float vectors file {self.path.name} ({exc.strerror})")

    def _before_commit(self) -> bool:
        """The commit hook: erased records reach the disk before the delete commits. Never vetoes."""
        if self._erased and self._fd is not None and self._rowids_fd is not None:
            self._erased = False
            try:
                os.fdatasync(self._fd)
                os.fdatasync(self._rowids_fd)
            except OSError as exc:
                self._warn(f"could not sync the float vectors file {self.path.name} ({exc.strerror})")
        return False

    def _header(self) -> tuple[Binding | None, str]:
        """The binding the file's header names, or None and why not (missing, damaged)."""
        try:
            with open(self.path, "rb") as handle:
                head = handle.read(HEADER_BYTES)
        except FileNotFoundError:
            return None, "missing"
        except OSError:
            return None, "damaged"
        if len(head) < HEADER_BYTES or not head.startswith(MAGIC):
            return None, "damaged"
        try:
            fields = json.loads(head[len(MAGIC) :].rstrip(b"\0"))
            binding = Binding(str(fields["embedder_id"]), int(fields["dim"]), int(fields["bound_at"]))
        except (ValueError, KeyError, TypeError):
            return None, "damaged"
        return (binding, "") if binding.dim > 0 else (None, "damaged")

    def _create(self, binding: Binding) -> None:
        """Empty files for `binding` in place of any others (the records' written aside, then renamed)."""
        self.close()
        partial = self.path.with_name(self.path.name + ".partial")
        head = MAGIC + json.dumps(asdict(binding)).encode()
        try:
            partial.unlink(missing_ok=True)
            descriptor = open_private(partial, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(descriptor, head.ljust(HEADER_BYTES, b"\0"))
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            os.close(open_private(self.rowids_path, os.O_WRONLY | os.O_TRUNC))
            os.replace(partial, self.path)
        except OSError as exc:
            self._warn(f"could not make the float vectors file {self.path.name} ({exc.strerror})")
            partial.unlink(missing_ok=True)
            return
        self._open(binding.dim)

    def _open(self, dim: int) -> None:
        """Open both files and learn where each rowid's record is (module doc: after a crash)."""
        try:
            self._fd = open_private(self.path, os.O_RDWR)
            self._rowids_fd = open_private(self.rowids_path, os.O_RDWR)
            self._dim = dim
            records = (os.fstat(self._fd).st_size - HEADER_BYTES) // (8 + dim * 4)
            entries = array.array("q", self.rowids_path.read_bytes()[: records * 8])
            if sys.byteorder != "little":
                entries.byteswap()
            listed = entries.tolist()
            for number in range(len(listed), records):  # listed after a crash lost their entries
                head = os.pread(self._fd, 8, self._offset(number))
                listed.append(_ROWID.unpack(head)[0] if len(head) == 8 else 0)
                os.pwrite(self._rowids_fd, head.ljust(8, b"\0"), number * 8)
        except (OSError, ValueError) as exc:
            self.close()
            self._warn(f"could not open the float vectors file {self.path.name} ({exc})")
            return
        self._records = records
        self._where = RecordIndex(listed)

    def _warn(self, message: str) -> None:
        if not self._warned:  # once a process: the searches go on reading the table meanwhile
            self._warned = True
            log.warning("%s; searches read the database's vectors instead", message)

    # -- any thread ------------------------------------------------------------------------------

    def read(
        self, rowids: Sequence[int], shortlisted: Sequence[float], query: npt.NDArray[np.float32]
    ) -> list[bytes | None]:
        """Each rowid's float32 row as bytes, where the file holds it and it agrees with the int8
        score `shortlisted` gave it (`checked`); None where the table must be read. The rows None
        for are queued for `repair` (a row repaired once and still disagreeing is not queued again)."""
        import numpy as np

        found: list[bytes | None] = [None] * len(rowids)
        binding, descriptor, where = self._binding, self._fd, self._where
        if binding is not None and descriptor is not None and rowids:
            size = 8 + binding.dim * 4
            read: list[tuple[int, bytes]] = []
            try:
                for i, (rowid, number) in enumerate(zip(rowids, where.find(rowids), strict=True)):
                    if number is not None:
                        record = os.pread(descriptor, size, HEADER_BYTES + number * size)
                        if len(record) == size and _ROWID.unpack_from(record)[0] == rowid:
                            read.append((i, record[8:]))
            except OSError:
                read = []
            if read:
                matrix = np.frombuffer(b"".join(row for _, row in read), dtype="<f4").reshape(len(read), binding.dim)
                agree = checked(matrix, [shortlisted[i] for i, _ in read], query)
                for (i, row), good in zip(read, agree, strict=True):
                    if good:
                        found[i] = row
                if not all(agree):
                    self._warn(f"rows of the float vectors file {self.path.name} disagree with the database")
        missing = {rowid for rowid, row in zip(rowids, found, strict=True) if row is None} - self._repaired
        if missing and binding is not None:
            with self._lock:
                self._to_repair |= missing
                self._repaired |= missing
        return found

    def pending(self) -> bool:
        """Whether rows wait for `repair`."""
        return bool(self._to_repair)


def checked(rows: npt.NDArray[np.float32], shortlisted: Sequence[float], query: npt.NDArray[np.float32]) -> list[bool]:
    """Whether each float row, quantized as the int8 copies are, scores exactly the approximate
    distance (1 − int8 score) the shortlist gave its rowid: the row is then the one the copy was
    made from. A zero row never agrees (an erased record)."""
    from klaw.store.shared.vector_quant import quantize, scores

    codes, scales = quantize(rows)
    distances = (1.0 - scores(codes, scales, query)).tolist()
    return [bool(scale > 0) and d == s for d, s, scale in zip(distances, shortlisted, scales.tolist(), strict=True)]
