"""The notes a forget keeps while it works (`settings`, `PENDING_KEY`: its tombstone's id, noted before the
tombstone is logged and dropped once the log files are rewritten), and what each note left says.

A note outlives its forget when the process stops part-way (a kill, a full disk). `klaw log check`, `klaw
memory forget`, `klaw reindex` and the engine's start read them back (decision 454). A note alone did
not say how far its forget got: read only from the database, a forget killed after its log rewrite was
"the log still holds the text" (it did not), and one whose tombstone reached the log but not the database
(a full disk) was not named at all, while the text stayed everywhere (adversary26). Each note is now
classed by where its tombstone is and what the log and database still hold (decision 468).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from klaw.store.archival_records import forgotten_days, forgotten_ids
from klaw.store.records import ChatRef, MessageRecord

if TYPE_CHECKING:
    from klaw.memory.conversation_log import ConversationLog
    from klaw.memory.migrated_copy import MigratedCopy
    from klaw.store.protocol import Storage

log = logging.getLogger("klaw.memory.forgetting")  # its warning is quieted with the forget's own (the CLI)

PENDING_KEY = "forget.pendingLogRewrites"  # tombstone ids whose log files may still hold forgotten lines


class Left(enum.Enum):
    """How far a noted forget got."""

    LOG = "log"  # its tombstone is stored; log files still hold lines of the records it names
    NOTE = "note"  # done everywhere: only its note was left (stopped before dropping it)
    NOT_STORED = "not stored"  # its tombstone is in the log, not in the database, which still holds the text
    NOTHING = "nothing"  # its tombstone never reached the log: nothing was forgotten


@dataclass(frozen=True)
class NotedForget:
    tombstone_id: str
    tombstone: MessageRecord | None
    left: Left

    @property
    def chat(self) -> ChatRef:
        assert self.tombstone is not None
        return self.tombstone.chat

    @property
    def target(self) -> str:
        """What it forgets as a person named it (`exchange 7`)."""
        return str(((self.tombstone.metadata if self.tombstone else None) or {}).get("target", "?"))


class ForgetNotes:
    def __init__(self, store: Storage, conversation_log: ConversationLog, copy: MigratedCopy | None = None) -> None:
        self._store = store
        self._log = conversation_log
        self._copy = copy  # a PostgreSQL home's SQLite copy: a forget's last step, so redone here (decision 544)

    async def ids(self) -> list[str]:
        value = await self._store.settings.get(PENDING_KEY)
        return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []

    async def note(self, tombstone_id: str, *, add: bool) -> None:
        pending = [item for item in await self.ids() if item != tombstone_id]
        if add:
            pending.append(tombstone_id)
        if pending:
            await self._store.settings.set(PENDING_KEY, pending)
        else:
            await self._store.settings.delete(PENDING_KEY)

    async def read(self) -> list[NotedForget]:
        """Each noted forget and how far it got (read only)."""
        return [await self._classed(tombstone_id) for tombstone_id in await self.ids()]

    async def _classed(self, tombstone_id: str) -> NotedForget:
        stored = await self._store.messages.get(tombstone_id)
        tombstone = stored.record if stored is not None else await self._log.find_record(tombstone_id)
        if tombstone is None:
            return NotedForget(tombstone_id, None, Left.NOTHING)
        ids = forgotten_ids(tombstone)
        if stored is None:  # logged, never folded: the database holds the records still, unless forgotten since
            for record_id in ids:
                if await self._store.messages.get(record_id) is not None:
                    return NotedForget(tombstone_id, tombstone, Left.NOT_STORED)
        days = forgotten_days(tombstone) or None
        held = await self._log.holds_records(tombstone.chat, ids, days)
        return NotedForget(tombstone_id, tombstone, Left.LOG if held else Left.NOTE)

    async def finish(self) -> int:
        """Rewrite the log files a forget stopped part-way left holding forgotten records, and drop the notes
        of those done (or never begun); returns how many files were rewritten. A tombstone the database lacks
        keeps its note: the next engine start's crash recovery folds it, then this finishes it."""
        rewritten, finished = 0, 0
        for noted in await self.read():
            if noted.left is Left.NOT_STORED:
                continue
            if noted.left is Left.LOG:
                tombstone = noted.tombstone
                assert tombstone is not None
                days = forgotten_days(tombstone) or None
                rewritten += len(await self._log.remove_records(tombstone.chat, forgotten_ids(tombstone), days))
            if self._copy is not None and noted.tombstone is not None:  # stopped before or in the copy's erase
                await asyncio.to_thread(self._copy.erase, noted.tombstone.chat, forgotten_ids(noted.tombstone))
            await self.note(noted.tombstone_id, add=False)
            finished += 1
        if finished:
            await self._store.history.checkpoint()
            log.warning("finished %d interrupted forget(s): %d log file(s) rewritten", finished, rewritten)
        return rewritten


def unfinished(noted: list[NotedForget]) -> list[NotedForget]:
    """The forgets whose text is still somewhere (`klaw log check` exits 1 for them)."""
    return [n for n in noted if n.left in (Left.LOG, Left.NOT_STORED)]


def not_stored_words(noted: NotedForget) -> str:
    """A forget whose tombstone reached the log, not the database: the text is everywhere still."""
    return (
        f"A forget of {noted.target} of {noted.chat} did not finish: its tombstone reached the log but not the"
        " database (the disk was full, or the process was stopped), so its text is still in the database, search"
        f" and the log. The next engine start finishes it, and so does `klaw memory forget {noted.target} --yes`"
        " run again (free some space first if the disk is full)."
    )


def note_left_words(noted: NotedForget) -> str:
    """A forget stopped after its work, before it dropped its note: nothing of the text is left."""
    return (
        f"A forget of {noted.target} of {noted.chat} was stopped after it finished (its text is out of the"
        " database, search and the log) and before it cleared its note: nothing is left to do; the next"
        " `klaw memory forget`, `klaw reindex` or engine start clears the note."
    )
