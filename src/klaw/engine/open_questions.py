"""The held calls whose approval question is open, noted on disk so a start after a kill -9 knows them.

The approval gate keeps its questions in memory: after a crash, a call whose question was open (never
approved, never run) looked like one approved and cut off mid-run, and the resumed turn told the model
it "may or may not have taken effect" (decision 441). The gate notes each call here before it asks and
takes it out once the question is over, before an approved call runs (decision 447). At the next start,
the chat's first turn writes each noted call still without a result into the log as not run
(interrupted_exchanges.py), and that result, not this file, is what every later reader sees.

One small JSON file in the home ({"channel\\u0000chat_id": [tool call ids]}), private (0600), replaced
whole on each change. Never the arguments: they are the conversation. A file that cannot be read is
taken as empty: the calls are then told as unknown, as before.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from klaw.atomic_file import replace_file
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)
_SEP = "\u0000"


class OpenQuestions:
    """The noted calls by chat; those found at start stay until their chat's first turn takes them."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._open: dict[str, list[str]] = _read(path) if path is not None else {}

    def asked(self, chat: ChatRef, call_id: str) -> None:
        self._open.setdefault(_key(chat), []).append(call_id)
        self._save()

    def over(self, chat: ChatRef, call_id: str) -> None:
        ids = self._open.get(_key(chat), [])
        if call_id in ids:
            ids.remove(call_id)
            if not ids:
                self._open.pop(_key(chat))
            self._save()

    def take(self, chat: ChatRef) -> frozenset[str]:
        """The chat's noted calls, no longer noted: its first turn after a start writes them as not run."""
        ids = self._open.pop(_key(chat), None)
        if ids is not None:
            self._save()
        return frozenset(ids or ())

    def keep_only(self, chats: set[ChatRef]) -> None:
        """Forget the notes of chats with nothing cut off (another engine sharing the store took them over):
        a stale call id, reused by a later call, would tell that one as never approved."""
        kept = {_key(chat) for chat in chats}
        if stale := [key for key in self._open if key not in kept]:
            for key in stale:
                del self._open[key]
            self._save()

    def _save(self) -> None:
        if self._path is None:
            return
        try:
            replace_file(self._path, json.dumps(self._open).encode())
        except OSError as exc:  # the question is still asked; after a crash its call is told as unknown
            log.warning("could not note the open approval questions in %s: %s", self._path, type(exc).__name__)


def _key(chat: ChatRef) -> str:
    return f"{chat.channel}{_SEP}{chat.chat_id}"


def _read(path: Path) -> dict[str, list[str]]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring the open approval questions noted in %s: %s", path, type(exc).__name__)
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {str(k): [str(i) for i in v if isinstance(i, str)] for k, v in loaded.items() if isinstance(v, list) and v}
