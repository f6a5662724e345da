"""Where each message a turn answers came from, as far as the engine's socket knew it: so a terminal can say whose
message a reply answers when it is not one of its own (decision 535).

A message comes through a connection whose `hello` said what it is: a piped `klaw chat` (its frame `whole`,
decision 520), one beside an attached terminal (`watching`, decision 527), a terminal (`console` served), the web
page or Telegram (the channel it serves); the start adds the messages a crash left unanswered (`RESTART`). Kept in
memory only, the newest `MAX_KEPT`: an origin is needed while the message's turn runs, and a reply sent again at a
later start is labelled as one that waited anyway.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

PIPE_BESIDE_TERMINAL = "pipe-beside-terminal"
PIPE = "pipe"
TERMINAL = "terminal"
RESTART = "restart"
SOCKET = "socket"  # a client that said no hello for the channel (a script on the socket)
MAX_KEPT = 10_000


def origin_of(channel: str, *, whole: bool, serves: frozenset[str], watches: frozenset[str]) -> str:
    """The origin of a message on `channel` from a connection serving `serves` and watching `watches`."""
    if channel in watches:
        return PIPE_BESIDE_TERMINAL
    if whole:
        return PIPE
    if channel in serves:
        return TERMINAL if channel == "console" else channel
    return SOCKET


class MessageOrigins:
    """Message id → origin, the newest `MAX_KEPT`."""

    def __init__(self, kept: int = MAX_KEPT) -> None:
        self._kept = kept
        self._origins: OrderedDict[str, str] = OrderedDict()

    def note(self, message_ids: Iterable[str], origin: str) -> None:
        for message_id in message_ids:
            self._origins[message_id] = origin
            self._origins.move_to_end(message_id)
        while len(self._origins) > self._kept:
            self._origins.popitem(last=False)

    def of(self, message_id: str | None) -> str | None:
        return None if message_id is None else self._origins.get(message_id)
