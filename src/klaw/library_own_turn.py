"""What a program's tool may not ask of the `Klaw` it holds: what would wait for the turn that waits for it.

A tool of a program's own (`Klaw(tools=[...])`) runs inside its chat's turn, which waits for it. Asking
its own chat would queue the message behind that turn until the tool timed out (decision 322). So would
a chain of asks that comes back to a chat whose turn is waiting: chat A's tool asks B, and B's tool asks
A; A's turn waits for its tool, which waits for B's turn, which waits for its tool, which would wait for
A's turn. Each `ask` made from a tool is recorded here (which chat's tool waits for which chat) while it
waits, so the ask that closes the loop is refused at once, in words naming the chain (decision 331).

A slash command is answered at once, without the chat's turn lock, so asking one from a tool waits on
nothing: `/status`, `/tools`, `/new`… are answered as if the person typed them during the turn. Three
are refused: `/forget` stops the chat's turn under way and holds the chat while it erases (the tool's
own turn: it would wait for itself), and `/approve` and `/deny` answer a question that waits for the
person, which the turn's own tool must not answer for them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from klaw.command_syntax import ENGINE_COMMANDS, parse_command
from klaw.errors import KlawError
from klaw.store.records import ChatRef

TURN_COMMANDS = frozenset({"forget", "approve", "deny"})
"""Commands a tool may not ask of its own chat: `/forget` waits for the chat's turn, `/approve` and
`/deny` answer for the person (decision 331)."""


class OwnTurnRunning(KlawError, RuntimeError):
    """A tool asked its own chat, or a chat whose turn waits for it through a chain of asks, or closed
    the engine, while the turn that called it runs: each would wait for itself (decisions 322, 331).
    Asking another chat from a tool is allowed, and so are the slash commands that wait on no turn."""


class AskChains:
    """Which chat's tool is waiting for an `ask` to which chat, for as long as it waits."""

    def __init__(self) -> None:
        self._asks: Counter[tuple[ChatRef, ChatRef]] = Counter()  # (the asking tool's chat, the chat asked)

    def refuse(self, caller: ChatRef | None, asked: ChatRef, text: str) -> None:
        """Raise `OwnTurnRunning` if a tool of `caller`'s turn asking `asked` for `text` would wait for a
        turn that waits for it; None (`caller`) is no tool: nothing waits on it."""
        if caller is None:
            return
        command = parse_command(text)
        if command is not None and command.name in ENGINE_COMMANDS:  # another `/name` may call a skill: a turn (529)
            if caller == asked and command.name in TURN_COMMANDS:
                raise OwnTurnRunning(
                    f"a tool cannot ask /{command.name} of its own chat ({_name(asked)}) while its turn runs:"
                    + (
                        " /forget stops the turn under way and waits for it, and the turn waits for the tool;"
                        " tell the person to type /forget, or ask it after `ask` returns"
                        if command.name == "forget"
                        else f" /{command.name} answers a question that waits for the person, not for the"
                        " chat's own tools; the person (or the program's approve callback) answers it"
                    )
                )
            return  # answered at once, without the turn lock: it waits on nothing
        if caller == asked:
            raise OwnTurnRunning(
                f"a tool cannot ask its own chat ({_name(asked)}) while its turn runs: the turn"
                " waits for the tool, so the message would wait behind it; return what the tool found and let"
                " the model answer, or ask another chat"
            )
        waits = self._waiting_for(caller)
        if asked in waits:
            loop = [asked]
            while loop[-1] != caller:
                loop.append(waits[loop[-1]])
            said = " → ".join(_name(chat) for chat in [*loop, asked])
            raise OwnTurnRunning(
                f"a tool of {_name(caller)} cannot ask {_name(asked)} while {_name(asked)}'s turn runs: that"
                f" turn waits, through its tool's ask, for this one ({said}), so the message would wait"
                " behind it; return what the tool found and let the model answer"
            )

    @contextmanager
    def asking(self, caller: ChatRef | None, asked: ChatRef) -> Iterator[None]:
        """Record, while the code inside waits, that `caller`'s tool waits for `asked`'s turn."""
        if caller is None:
            yield
            return
        key = (caller, asked)
        self._asks[key] += 1
        try:
            yield
        finally:
            self._asks[key] -= 1
            if not self._asks[key]:
                del self._asks[key]

    def _waiting_for(self, chat: ChatRef) -> dict[ChatRef, ChatRef]:
        """The chats whose turns wait for `chat`'s (those whose tool asked it, those whose tool asked one
        of them, and so on), each with the chat its tool asked: the way back to `chat`."""
        found: dict[ChatRef, ChatRef] = {}
        edge = {chat}
        while edge:
            nearer = {waiter: asked for (waiter, asked) in self._asks if asked in edge and waiter not in found}
            nearer.pop(chat, None)
            found.update(nearer)
            edge = set(nearer)
        return found


def _name(chat: ChatRef) -> str:
    return f"{chat.channel}:{chat.chat_id}"
