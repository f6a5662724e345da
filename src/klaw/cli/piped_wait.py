"""Piped `klaw chat`s one after another: a piped chat waits for another piped chat holding the home.

`echo … | klaw chat` three at once had two exit 2 "leave it first (/exit or Ctrl-D in its terminal)" while
the holder was a piped chat with no terminal that ends in seconds (adversary28). A person scripting klaw
wants every message answered, so a piped chat that finds another piped chat holding the home (before its
start, or losing the start race to it) waits for it, with a line on stderr saying so, up to
`PIPED_WAIT_SECONDS` in all; then exit 75 saying it is still running (decision 487). A piped chat holds
the home under its own name (`PIPED_CHAT`), so the others can tell it from a person's terminal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from klaw.home import KlawHome
from klaw.home_lock import PIPED_CHAT, holder_of

PIPED_WAIT_SECONDS = 300.0
_POLL_SECONDS = 0.2
Say = Callable[[str], None]


class PipedWait:
    """One piped chat's waiting, bounded in all however often it loses a start race."""

    def __init__(self, home: KlawHome, say: Say, seconds: float = PIPED_WAIT_SECONDS) -> None:
        self._home = home
        self._say = say
        self._deadline = time.monotonic() + seconds
        self._seconds = seconds
        self._said = False

    async def until_free(self) -> bool:
        """True once no piped chat holds the home (something else may: the caller looks again); False
        when none held it to begin with or the time ran out (`timed_out` then says so)."""
        holder = holder_of(self._home.root)
        if holder is None or holder.command != PIPED_CHAT:
            return False
        if not self._said:
            self._say(
                f"another piped klaw chat (pid {holder.pid}) is answering on {self._home.root}: waiting for it"
                f" to finish (up to {self._seconds:g} s)"
            )
            self._said = True
        while time.monotonic() < self._deadline:
            await asyncio.sleep(_POLL_SECONDS)
            holder = holder_of(self._home.root)
            if holder is None or holder.command != PIPED_CHAT:
                return True
        return False

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self._deadline

    def timed_out(self) -> str:
        return (
            f"another piped klaw chat is still running on {self._home.root} after {self._seconds:g} s: wait for"
            " it, or send your messages one after another"
        )
