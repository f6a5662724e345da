"""The held calls whose approval question is open, noted on disk so a start after a kill -9 knows them.

The approval gate keeps its questions in memory: after a crash, a call whose question was open (never
approved, never run) looked like one approved and cut off mid-run, and the resumed turn told the model
it "may or may not have taken effect" (decision 441). The gate notes each call here before it asks and
takes it out once the question is over, before an approved call runs (decision 447). At the next start,
the chat's first turn writes each noted call still without a result into the log as not run
(interrupted_exchanges.py), and that result, not this file, is what every later reader sees.

One small JSON file in the home ({"channel\\u0000chat_id": [tool call ids]}), private (0600), replaced
whole on each change. Never the arguments: they are the conversation. A file that cannot be read (not a
regular file, over `MAX_BYTES`, not JSON, nested too deep: put there by hand) is warned about, named, and taken
as empty: the calls are then told as unknown, as before; the start goes on (decision 453).

A call whose id cannot be taken out (a full disk) is not run although approved (approval.py): a kill after it
ran would have left the note saying it never was, and the restarted engine would tell the model so, which could
make a payment twice (adversary25). The note on disk, not the one in memory, is what decides.

On a store several engines share (PostgreSQL, decision 132) the chat's note is also kept in the store's
settings (`approvals_open:["channel","chat"]`), written before the question and taken out before an approved
call runs: the engine that takes a dead engine's chat over reads it there (`take_shared`, as it closes the
cut-off exchange), since the dead engine's home is not its own (decision 466). One key per chat, written only
under the chat's lease, so two engines never write one key at once.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from klaw.atomic_file import replace_file
from klaw.scheduling.names import SUBAGENT_CHANNEL
from klaw.small_file import read_small, refused, size_words
from klaw.store.protocol import SettingsRepository
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)
_SEP = "\u0000"
_RUN = f"{SUBAGENT_CHANNEL}{_SEP}"  # a run's chat (a spawned subagent's question, decision 525)
SHARED_KEY = "approvals_open:"  # + the chat as a JSON pair: PostgreSQL's text holds no NUL
MAX_BYTES = 1 << 20  # thousands of open questions; klaw's own note holds a few ids


def not_run_unrecorded(tool: str) -> str:
    """The approved call's result when its note could not be taken out, and the answer to its `/approve`."""
    return (
        f"Not run: klaw could not record the approval of {tool} (approvals-open.json in its home, or the note in"
        f" the database the engines share, could not be rewritten: is the disk full or the database down?); run"
        f" unrecorded, a crash could have had it made twice. Free some space (or bring the database back), then"
        f" ask for {tool} again if it is still wanted."
    )


class OpenQuestions:
    """The noted calls by chat; those found at start stay until their chat's first turn takes them."""

    def __init__(self, path: Path | None, shared: SettingsRepository | None = None) -> None:
        self._path = path
        self._shared = shared  # a store several engines share: the chat's note kept there too (decision 466)
        self._open: dict[str, list[str]] = _read(path) if path is not None else {}
        self._saved = {key: set(ids) for key, ids in self._open.items()}  # what the file holds, as far as known
        self._runs_at_start: set[str] = set()  # runs' notes a kill left, for the cut-off runs' telling (535)

    async def ask(self, chat: ChatRef, call_id: str) -> None:
        """Note the call before its question is sent, in the home and, shared, in the store."""
        self.asked(chat, call_id)
        await self._share(chat)

    async def close(self, chat: ChatRef, call_id: str) -> bool:
        """`over`, and the shared note rewritten; False when either still holds the call."""
        recorded = self.over(chat, call_id)
        return await self._share(chat) and recorded

    def asked(self, chat: ChatRef, call_id: str) -> None:
        self._open.setdefault(_key(chat), []).append(call_id)
        self._save()

    def over(self, chat: ChatRef, call_id: str) -> bool:
        """Take the call out, as its question is over. False: the file still holds it (it could not be
        rewritten), so a call approved must not run: after a kill it would be told as never approved."""
        ids = self._open.get(_key(chat), [])
        if call_id in ids:
            ids.remove(call_id)
            if not ids:
                self._open.pop(_key(chat))
            self._save()
        return call_id not in self._saved.get(_key(chat), ())

    def take(self, chat: ChatRef) -> frozenset[str]:
        """The chat's noted calls, no longer noted: its first turn after a start writes them as not run."""
        ids = self._open.pop(_key(chat), None)
        if ids is not None:
            self._save()
        return frozenset(ids or ())

    def keep_only(self, chats: set[ChatRef]) -> None:
        """Forget the notes of chats with nothing cut off (another engine sharing the store took them over):
        a stale call id, reused by a later call, would tell that one as never approved. A run's notes stay
        until the scheduler tells its cut-off run (`take_run`, then `drop_runs_left`: decision 535)."""
        kept = {_key(chat) for chat in chats}
        self._runs_at_start = {key for key in self._open if key.startswith(_RUN)}
        if stale := [key for key in self._open if key not in kept and key not in self._runs_at_start]:
            for key in stale:
                del self._open[key]
            self._save()

    async def take_run(self, chat: ChatRef) -> frozenset[str]:
        """A cut-off run's noted calls, no longer noted here nor in a shared store: told as never approved."""
        ids = self.take(chat)
        self._runs_at_start.discard(_key(chat))
        if ids and self._shared is not None:
            try:
                await self._shared.delete(shared_key(chat))
            except Exception as exc:  # the store down: a later start tells the call as unknown, as before
                why = type(exc).__name__
                log.warning("could not take the open approval questions of %s from the store: %s", chat, why)
        return ids

    def drop_runs_left(self) -> None:
        """The cut-off runs told: a run's note that none took (its run had ended, or scheduler.db lost its
        note) is stale, and goes (decision 535)."""
        if left := [key for key in self._runs_at_start if key in self._open]:
            for key in left:
                del self._open[key]
            self._save()
        self._runs_at_start = set()

    async def _share(self, chat: ChatRef) -> bool:
        if self._shared is None:
            return True
        ids = self._open.get(_key(chat))
        try:
            await (self._shared.set(shared_key(chat), ids) if ids else self._shared.delete(shared_key(chat)))
        except Exception as exc:  # the store down: the question is still asked; an approved call does not run
            log.warning("could not note the open approval questions of %s in the store: %s", chat, type(exc).__name__)
            return False
        return True

    def _save(self) -> None:
        if self._path is None:
            return
        try:
            replace_file(self._path, json.dumps(self._open).encode())
            self._saved = {key: set(ids) for key, ids in self._open.items()}
        except OSError as exc:  # the question is still asked; after a crash its call is told as unknown
            log.warning("could not note the open approval questions in %s: %s", self._path, type(exc).__name__)


async def take_shared(settings: SettingsRepository, chat: ChatRef) -> frozenset[str]:
    """The calls of `chat` an engine sharing the store noted as asked and never took out (it died with
    their questions open); the note itself goes with `drop_shared` once their results are written."""
    value = await settings.get(shared_key(chat))
    return frozenset(i for i in value if isinstance(i, str)) if isinstance(value, list) else frozenset()


async def drop_shared(settings: SettingsRepository, chat: ChatRef) -> None:
    await settings.delete(shared_key(chat))


def shared_key(chat: ChatRef) -> str:
    return SHARED_KEY + json.dumps([chat.channel, chat.chat_id])


def _key(chat: ChatRef) -> str:
    return f"{chat.channel}{_SEP}{chat.chat_id}"


def _read(path: Path) -> dict[str, list[str]]:
    """The note as a kill left it; {} with a warning naming the file when it is not one klaw could have
    written: deeply nested JSON stopped the start with a RecursionError, a FIFO hung it, /dev/zero ate memory."""
    try:
        loaded = json.loads(read_small(path, MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        _ignored(path, exc)
        return {}
    if not isinstance(loaded, dict):
        _ignored(path, "not a JSON object")
        return {}
    return {str(k): [str(i) for i in v if isinstance(i, str)] for k, v in loaded.items() if isinstance(v, list) and v}


def _ignored(path: Path, problem: BaseException | str) -> None:
    fix = (
        "it is ignored. It is klaw's note of the approval questions open at a kill, and klaw writes it as a small"
        f" JSON object (at most {size_words(MAX_BYTES)}). Remove it; a call whose question was open when klaw was"
        " killed is then told to the model as one that may or may not have run"
    )
    log.warning("%s", refused(path, problem, fix))
