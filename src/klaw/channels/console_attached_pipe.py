"""`echo "…" | klaw chat` attached to a running engine: its one message's reply, and only its own (decision 516).

The in-process piped chat ends a question to approve a tool as one nobody can answer (no terminal: the
model is told so, not that the person denied it) and prints the reply the turn goes on to. The attached
one used to print the question and leave with status 3, the question left open: the console chat's turn
then held every later message for `tools.approvalTimeoutSeconds`, and the next pipe, silent all that
while, was handed the first one's reply. Now the pipe ends its question through the engine (the
`nobody_can_answer` query) and prints its reply as in process. A question asked before its message (a
terminal that left it open, a pipe killed while asked) is not its to end: the pipe says on stderr that it
waits for it, naming the tool, the id and the time left, as its wait for an attached terminal does. Its
stdout is the reply to its message; anything else that comes meanwhile goes to stderr under a label.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from klaw.channels.console import CONSOLE_CHANNEL as CONSOLE
from klaw.channels.console import LEAVING_HELP
from klaw.gateway.link import EngineUnavailable, QueryFailed
from klaw.terminal_text import visible

if TYPE_CHECKING:
    from klaw.engine.frames import OutboundFrame
    from klaw.gateway.service import Gateway

_LEFT = re.compile(r"\(no answer (in the .+? left|within .+?) means no\)")


WATCHING_SINCE = 2
"""The engine protocol version (frames.py) that sends a pipe beside a terminal copies of the chat's replies."""


def older_engine(who: str, home: object) -> str:
    """Why a pipe beside a terminal is not sent to an engine older than `WATCHING_SINCE`: that engine ignores
    `hello`'s `watching`, so the pipe would wait for ever for a reply it is never sent (decision 535)."""
    return (
        f"the running engine is older than this klaw: restart it with `klaw serve` ({who} on {home}; `klaw engine`"
        " if it runs alone, `systemctl --user restart klaw` as the service), then pipe again. It cannot send a"
        " message piped in beside an attached `klaw chat` terminal its reply. Nothing was sent."
    )


BESIDE_TERMINAL = (
    "A `klaw chat` terminal is attached: this message went into its chat, and the terminal shows its reply."
)


def asked_there(question: dict[str, Any]) -> str:
    """What a piped chat beside a terminal says while a question holds its chat's turn: answered there. It
    names who wants what as the terminal's question does ("The subagent 'held', which the agent spawned from
    this chat, wants to run file_write"), not "a tool" (decision 535)."""
    request_id, who = str(question.get("id")), who_wants(question)
    then = (
        "this message is answered once it is answered there (or times out)"
        if who.startswith("The agent ")
        else "the subagent's run waits for that answer, this message's reply does not"
    )
    where = "the question is asked in the attached `klaw chat` terminal"
    return f"waiting: {who} (request {request_id}); {where}, and {then}."


def who_wants(question: dict[str, Any]) -> str:
    """The question's own first words, "The agent wants to run NAME" or "The subagent 'x', which the agent
    spawned from this chat, wants to run NAME" (approval_question.py); from its tool alone when the text says
    neither."""
    first = str(question.get("text", "")).partition("\n")[0]
    named = re.match(r"(The .{1,200}? wants to run \S+?)[:.]?(?:\s|$)", first)
    return visible(named[1]) if named else f"The agent wants to run {visible(str(question.get('tool')))}"


def waiting_for(question: dict[str, Any]) -> str:
    """What a piped chat says on stderr when a question asked before its message holds the chat's turn."""
    request_id, tool = str(question.get("id")), str(question.get("tool"))
    found = _LEFT.search(str(question.get("text", "")))
    left = f"; no answer {found[1]} means no" if found else ""
    return (
        f"waiting: an earlier question in this chat holds its turn ({tool}, request {request_id}{left}); this"
        " message is answered after it. To answer it: Ctrl-C here (the message stays sent), then `klaw chat` at a"
        f" terminal asks it (/approve {request_id} or /deny {request_id})."
    )


class AttachedPipe:
    """One piped message through an attached console's gateway: `answer` prints its reply and gives the exit status."""

    def __init__(
        self,
        gateway: Gateway,
        chat_id: str,
        consoles: tuple[Console, Console],
        submit: Callable[[str], Awaitable[str | None]],
        next_frame: Callable[[], Awaitable[OutboundFrame]],
        show_arrival: Callable[[OutboundFrame], None],
    ) -> None:
        self._gateway = gateway
        self._chat_id = chat_id
        self._stdout, self._stderr = consoles
        self._submit = submit
        self._next_frame = next_frame
        self._show_arrival = show_arrival

    async def answer(self, text: str, *, beside_terminal: bool = False) -> int:
        """0 with the reply on stdout; 1 when the reply is an error or nothing was sent. `beside_terminal`:
        the chat's terminal shows the message's reply and asks its questions; this pipe waits for them."""
        from klaw.command_syntax import parse_command

        command = parse_command(text)
        before = await self._open_questions() if command is None else {}
        if command is None and not beside_terminal:  # beside a terminal its questions are the terminal's (527)
            await self._say_piped()
        message_id = await self._submit(text)
        if message_id is None:
            return 1
        if beside_terminal:
            self._stderr.print(Text(BESIDE_TERMINAL, style="yellow"), highlight=False)
        for question in before.values():
            said = asked_there(question) if beside_terminal else waiting_for(question)
            self._stderr.print(Text(said, style="yellow"), highlight=False)
        while (reply := await self._reply_to(message_id, before)).approval is not None:
            if beside_terminal:  # a person is there to answer it
                question = {"id": reply.approval, "text": reply.text}
                self._stderr.print(Text(asked_there(question), style="yellow"), highlight=False)
                before[str(reply.approval)] = question
                continue
            await self._end_unanswerable(reply)
        if reply.kind == "error":
            self._stderr.print(Text(visible(reply.text), style="red"), highlight=False)
            return 1
        said = reply.text + (
            f"\n{LEAVING_HELP}" if command is not None and command.name == "help" and not command.args else ""
        )
        self._stdout.out(visible(said) if self._stdout.is_terminal else said, highlight=False)
        return 0

    async def _reply_to(self, message_id: str, before: dict[str, dict[str, Any]]) -> OutboundFrame:
        """The reply to this message, or a question asked since it was sent (its turn's, or one no terminal can
        answer while this pipe holds the console's place); what else comes goes to stderr, labelled. An error
        is this message's only when it answers it: another message's failure is not this one's (decision 516)."""
        while True:
            reply = await self._next_frame()
            if reply.reply_to == message_id or message_id in reply.answers:
                return reply
            if reply.approval is not None:
                if reply.approval not in before:
                    return reply
                continue  # asked before this message: said once, at the start
            self._show_arrival(reply)

    async def _end_unanswerable(self, asked: OutboundFrame) -> None:
        """End the question unrun as one nobody can answer here, and say so on stderr with what was asked.
        One that no longer waits (answered elsewhere, timed out) is left: its turn goes on by itself."""
        from klaw.channels.console_markdown import reply_markdown

        params = {"channel": CONSOLE, "chat_id": self._chat_id, "id": asked.approval}
        try:
            found = await self._gateway.query("nobody_can_answer", params)
        except QueryFailed:  # an engine older than the query: the question waits for its own timeout
            self._stderr.print(Text(visible(asked.text)), highlight=False)
            self._stderr.print(
                Text(
                    "This engine cannot end the question for a piped chat (restart it to update it): the reply"
                    " comes once it is answered in `klaw chat` at a terminal or times out.",
                    style="yellow",
                ),
                highlight=False,
            )
            return
        except EngineUnavailable:
            return  # the engine went: a restarted one holds no question of before, and answers again
        if not isinstance(found, dict) or not found.get("ended"):
            return
        shown = asked.text.rpartition("\n")[0] or asked.text  # without the `/approve ID or /deny ID` line
        self._stderr.print(reply_markdown(shown))
        self._stderr.print(Text(visible(str(found.get("said", "")))), highlight=False)

    async def _say_piped(self) -> None:
        """Tell the engine this connection is a pipe: killed with its turn under way, its questions are ended
        as nobody can answer them, not left open for the approval timeout (decision 521). An engine older
        than the query leaves them open, as before."""
        if self._gateway.connected:
            with contextlib.suppress(EngineUnavailable, QueryFailed):
                await self._gateway.query("piped", {"channel": CONSOLE, "chat_id": self._chat_id})

    async def _open_questions(self) -> dict[str, dict[str, Any]]:
        """The questions waiting in the chat before this message is sent, by id (none when it cannot be asked)."""
        if not self._gateway.connected:
            return {}
        try:
            found = await self._gateway.query("approvals", {"channel": CONSOLE, "chat_id": self._chat_id})
        except (EngineUnavailable, QueryFailed):
            return {}
        questions = found.get("approvals", ()) if isinstance(found, dict) else ()
        return {str(q.get("id")): q for q in questions if isinstance(q, dict)}
