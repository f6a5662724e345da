"""Core memory: a small JSON object of lasting facts that goes into every context.

Checked on every turn (a `stat`: its times, size and inode) and read again when it changed (decision
481), so an edit by a tool, a command or a person with an editor is seen at once. A missing file is
empty memory; an unreadable one is reported and treated as empty rather than failing the turn.

`update` (the memory_core_update tool) changes top-level keys: it refuses a file it cannot read
(rather than overwrite what a person wrote), invalid keys and values, and a result larger than the
cap (the memory goes into every context), and writes atomically (temporary file, fsync, rename) so
a crash never leaves half a file. Updates are serialised; errors never quote the values.

The file is read only when it is a regular one of at most `MAX_FILE_BYTES` (small_file.py): a FIFO put
there held a worker thread, and the turn, for ever; a symlink to /dev/zero was read without end (453).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from klaw.atomic_file import replace_file
from klaw.errors import KlawError
from klaw.small_file import read_small, refused

log = logging.getLogger(__name__)

MAX_KEY_CHARS = 64
MAX_FILE_BYTES = 4 << 20  # far past any core memory a context could carry
_BY_HAND = "it is left as it is: ask the person to fix it by hand"
_AS_EMPTY = "it is treated as empty until it is fixed or removed by hand"


class CoreMemoryError(KlawError, ValueError):
    """An update that was refused; the message says why and never quotes a value."""


class CoreMemory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = asyncio.Lock()
        self._kept: tuple[_Stamp, dict[str, Any]] | None = None  # `read_now`'s last answer and the stamp it read

    async def update(
        self, set_values: Mapping[str, Any] | None = None, remove: Sequence[str] = (), *, max_chars: int
    ) -> dict[str, Any]:
        """Set and remove top-level keys; returns the new memory. `CoreMemoryError` when the file is
        unreadable, a key or value is invalid, a removed key is missing, or the rendered memory would
        exceed `max_chars` characters. Nothing is written unless everything is valid."""
        async with self._lock:
            return await asyncio.to_thread(self._update, dict(set_values or {}), list(remove), max_chars)

    def _update(self, set_values: dict[str, Any], remove: list[str], max_chars: int) -> dict[str, Any]:
        memory = self._read_strict()
        for key in remove:
            if key not in memory:
                raise CoreMemoryError(f"core memory has no key {_shown(key)}; memory_core_get lists the keys")
            del memory[key]
        for key, value in set_values.items():
            _check_key(key)
            _check_value(key, value)
            memory[key] = value
        size = len(self.render(memory))
        if size > max_chars:
            raise CoreMemoryError(
                f"core memory would take {size} characters, over its limit of {max_chars}"
                " (memory.coreMaxChars): shorten or remove entries; memory_save keeps longer notes searchable"
            )
        replace_file(self.path, (self.render(memory) + "\n").encode("utf-8"))
        return memory

    def _read_strict(self) -> dict[str, Any]:
        try:
            text = read_small(self.path, MAX_FILE_BYTES).decode("utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise CoreMemoryError(refused(self.path.name, exc, _BY_HAND)) from None
        if not text.strip():
            return {}
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # a hand edit: a number past 4,300 digits, nesting too deep
            raise CoreMemoryError(refused(self.path.name, exc, _BY_HAND)) from None
        if not isinstance(data, dict):
            raise CoreMemoryError(refused(self.path.name, "not a JSON object", _BY_HAND))
        return data

    async def read(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.read_now)

    def read_now(self) -> dict[str, Any]:
        """`read` on the calling thread (a file read: not on the event loop). What it read is kept with the
        file's stamp taken before the read, for `kept` (a file it refused is not kept: read, and warned about,
        at every turn as before)."""
        self._kept = None
        stamp = _stamp(self.path)
        try:
            text = read_small(self.path, MAX_FILE_BYTES).decode("utf-8")
        except FileNotFoundError:
            self._kept = (stamp, {}) if stamp == _NONE else None
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("core memory %s", refused(self.path, exc, _AS_EMPTY))
            return {}
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            log.warning("core memory %s", refused(self.path, exc, _AS_EMPTY))
            return {}
        if not isinstance(data, dict):
            log.warning("core memory %s", refused(self.path, "not a JSON object", _AS_EMPTY))
            return {}
        if stamp is not None:
            self._kept = (stamp, copy.deepcopy(data))
        return data

    def kept(self) -> Mapping[str, Any] | None:
        """What `read_now` last read, when the file's stamp is the same as then (one `stat`, no read: what the
        event loop may do itself, decision 481); None when it changed, was refused or was never read. Shared:
        not to be changed by the caller (the context builder only renders it)."""
        kept = self._kept
        if kept is None or _stamp(self.path) != kept[0]:
            return None
        return kept[1]

    @staticmethod
    def render(memory: Mapping[str, Any]) -> str:
        return json.dumps(memory, ensure_ascii=False, indent=2, sort_keys=True)


_Stamp = tuple[int, int, int, int]
_NONE: _Stamp = (-1, 0, 0, 0)  # no file


def _stamp(path: Path) -> _Stamp | None:
    """The file's modification and change times (ns), size and inode: a write in place or a file renamed over it
    (`update`'s way) changes it; `_NONE` when there is no file, None when `stat` fails otherwise."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return _NONE
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_ctime_ns, found.st_size, found.st_ino)


def _shown(key: str) -> str:
    return repr(key if len(key) <= MAX_KEY_CHARS else key[:MAX_KEY_CHARS] + "…")


def _check_key(key: str) -> None:
    if not key.strip() or key != key.strip():
        raise CoreMemoryError("a key must be non-empty text without leading or trailing spaces")
    if len(key) > MAX_KEY_CHARS:
        raise CoreMemoryError(f"key {_shown(key)} is longer than {MAX_KEY_CHARS} characters")


def _check_value(key: str, value: Any) -> None:
    """JSON values only (text, numbers, true/false, lists, objects), no null (remove the key instead)."""
    if value is None:
        raise CoreMemoryError(f"the value of {_shown(key)} is null: to delete a key, pass it in remove")
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise CoreMemoryError(f"the value of {_shown(key)} holds a number that JSON cannot store")
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                raise CoreMemoryError(f"the value of {_shown(key)} has an object key that is not text")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item is not None and not isinstance(item, str | int | float | bool):
            raise CoreMemoryError(f"the value of {_shown(key)} is not a JSON value")
