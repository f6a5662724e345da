"""The console attached to a running engine: `klaw chat` beside `klaw serve` or `klaw engine` (decision 430).

The terminal is one more gateway channel, not a second protocol: a `Gateway` running this channel alone
says `hello` for `console` on engine.sock, and what the person types goes as the web page's does, an
`inbound` frame (slash text a `command` frame) kept in its own buffer (KLAW_HOME/gateway/terminal) until
the engine acks it after its fsync. The engine routes outbound frames per channel, so the web page's
gateway (`web`, `telegram`) and the terminal (`console`) each get their own replies. A reply to `console`
made while no terminal is attached waits in the engine's queue for the channel and comes at the next
`hello` (or is sent again at the engine's next start): it is shown under `WHILE_AWAY`, as an in-process
chat shows a crash's unshown replies. One terminal at a time (`TerminalLock`): a second `console`
connection would take the first one's replies. The look is the in-process console's: the spinner while a
reply is awaited, replies drawn by `show_reply`, `approve? [y/N]` for a held tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from klaw.channels.console import CONSOLE_CHANNEL, LEAVING_HELP, REPLY_LABEL_STYLE, show_reply
from klaw.channels.console_cancel import ChatCtrlC, start_cancelling
from klaw.channels.console_prompt import approves, ask_approval, ctrl_c_clears_a_typed_line, next_message
from klaw.channels.console_waiting import TICK_SECONDS, AskedDoing, waiting_text
from klaw.command_syntax import parse_command
from klaw.engine.frames import DeltaFrame, FrameError, OutboundFrame, origin_label
from klaw.gateway.buffer import BufferUnavailable
from klaw.gateway.link import EngineUnavailable, QueryFailed
from klaw.terminal_text import visible

if TYPE_CHECKING:
    from pathlib import Path

    from prompt_toolkit import PromptSession
    from rich.status import Status

    from klaw.gateway.service import Gateway

WHILE_AWAY = "Reply that came while no terminal was attached:"
PIPED_IN = "Reply to a message piped in beside this terminal (`… | klaw chat`):"
OTHER_MESSAGE = "Reply to another message of this chat, not to the one piped now:"
WENT_AWAY = "The engine stopped. What you type is kept and sent when it is back; /exit leaves (nothing here starts it)."
BACK = "The engine is back."
KEPT = "The engine is not answering now: this message is kept and sent when it is back."
ENGINE_DOWN = "waiting for the engine… (the message is kept until it is back)"
OPEN_QUESTION = "A question waiting for your answer, asked before this terminal attached:"
QUESTION_GONE = (
    "The engine stopped before you answered: the question went with it, and the tool it asked about was not"
    " run (it was never approved). A restarted engine answers your message again, and asks again if it needs to."
)
OLDER_ENGINE = "the running engine cannot cancel a turn from an attached terminal (restart it to update it)"
WATCH_SECONDS = 0.2  # how often the link's state is looked at, to say the engine went away or came back
SETTLED_SECONDS = 0.5  # how often a y/N prompt asks the engine whether its question still waits (decision 450)


class AttachedConsole:
    """The `console` channel of a `Gateway` in this terminal: replies into a queue, shown by `run`/`answer_piped`."""

    name: str = CONSOLE_CHANNEL
    streaming: bool = False  # a terminal shows the whole reply under the spinner, as in process

    def __init__(self, console: Console, chat_id: str, model_id: str, timeout_seconds: float) -> None:
        self._console = console
        self._stderr = Console(stderr=True, markup=False, soft_wrap=not console.is_terminal)
        self._chat_id = chat_id
        self._model_id = model_id  # for the spinner's words: engine.yaml's default, as read here
        self._timeout = timeout_seconds
        self._replies: asyncio.Queue[OutboundFrame] = asyncio.Queue()
        self._held: list[OutboundFrame] = []  # taken from the queue while an approval prompt was up
        self._mine: set[str] = set()  # ids of what this terminal sent: their answers are no strangers
        self._asked: set[str] = set()  # the questions given a y/N prompt here: not shown again as they come
        self._question: str | None = None  # a question that came at `you ›`, for its y/N prompt
        self._gateway: Gateway | None = None
        self._there: bool | None = None  # whether the engine answered when last looked; None: not said yet
        self._ctrl_c = ChatCtrlC()  # SIGINT's one handler while `run` runs (console_cancel.py)
        self._cancels: set[asyncio.Task[None]] = set()  # `cancel_turn` queries under way

    # -- Channel --------------------------------------------------------------------------------
    async def start(self, gateway: Gateway) -> None:
        self._gateway = gateway

    async def stop(self) -> None:
        return None

    async def deliver(self, frame: OutboundFrame) -> None:
        self._engine_is(there=True)  # before what it sends: "back" above the replies, never below
        self._replies.put_nowait(frame)

    async def delta(self, frame: DeltaFrame) -> None:
        return None  # never asked for (streaming False)

    # -- the person -----------------------------------------------------------------------------
    async def run(self, banner: Text, history_file: Path) -> None:
        """Prompt until /exit, Ctrl-D or Ctrl-C on an empty line; the engine goes on after. Ctrl-C while a
        reply is awaited cancels the chat's turn in the engine, a second one leaves (decision 496)."""
        with self._ctrl_c.installed():
            await self._run(banner, history_file)

    async def _run(self, banner: Text, history_file: Path) -> None:
        from prompt_toolkit import PromptSession

        from klaw.channels.console_history import ConsoleHistory

        session: PromptSession[str] = PromptSession(
            history=ConsoleHistory(history_file), key_bindings=ctrl_c_clears_a_typed_line()
        )
        self._console.print(banner, highlight=False)
        watcher = asyncio.create_task(self._watch_link())
        try:
            await self._ask_open_questions(session)
            while (text := await next_message(session, self._print_arrivals)) is not None:
                if self._question is not None:  # came at `you ›` (the engine restarted, its turn asks again)
                    request_id, self._question = self._question, None
                    await self._answer_approval(None, request_id, session)
                if text:
                    await self._exchange(text, session)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def answer_piped(self, text: str, *, beside_terminal: bool = False) -> int:
        """`echo "…" | klaw chat`: the reply alone on stdout, exit status 0; 1 when it is an error. A held
        tool's question is ended as one nobody can answer here, as in process, and the reply the turn goes on
        to is printed (console_attached_pipe.py, decision 516: it left with status 3 and the question open).
        `beside_terminal`: a terminal serves the chat and shows this message's reply and questions; this pipe
        reads copies of them and shows nothing else (decision 527)."""
        from klaw.channels.console_attached_pipe import AttachedPipe

        consoles = (self._console, self._stderr)
        submit = functools.partial(self._submit, whole=True)  # all of stdin: answered without the debounce (520)
        shown = _shown_there if beside_terminal else self._show_arrival
        pipe = AttachedPipe(self.gateway, self._chat_id, consoles, submit, self._next_frame, shown)
        return await pipe.answer(text, beside_terminal=beside_terminal)

    async def _next_frame(self) -> OutboundFrame:
        return self._held.pop(0) if self._held else await self._replies.get()

    def show_pending(self) -> None:
        """Replies that arrived after the prompt closed, shown before the terminal leaves."""
        while self._held or not self._replies.empty():
            self._show_arrival(self._held.pop(0) if self._held else self._replies.get_nowait())

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:
            raise RuntimeError("the attached console is not started")
        return self._gateway

    async def _submit(self, text: str, *, whole: bool = False) -> str | None:
        """Buffer it for the engine; its id, or None after saying why it was not sent."""
        try:
            submitted = await self.gateway.submit(CONSOLE_CHANNEL, self._chat_id, text, whole=whole)
        except (FrameError, BufferUnavailable) as exc:
            why = exc.message if isinstance(exc, FrameError) else str(exc)
            self._stderr.print(Text(f"Not sent: {why}", style="red"), highlight=False)
            return None
        self._mine.add(submitted.id)
        if submitted.queued and self._console.is_terminal:
            self._console.print(Text(KEPT, style="yellow"), highlight=False)
        return submitted.id

    async def _exchange(self, text: str, session: PromptSession[str]) -> None:
        message_id = await self._submit(text)
        if message_id is None:
            return
        command = parse_command(text)
        while True:
            with self._console.status("thinking…", spinner="dots") as status:
                ticker = asyncio.create_task(self._count_up(status))
                waiting = asyncio.current_task()
                try:
                    with self._ctrl_c.cancels(functools.partial(self._cancel_turn, status, ticker, waiting)):
                        reply = await self._next_reply_to(message_id)
                finally:
                    ticker.cancel()
                    await asyncio.gather(ticker, return_exceptions=True)
            if command is not None and reply.kind == "notice" and reply.reply_to == message_id:
                help_tail = (
                    f"\n{LEAVING_HELP}" if command.name == "help" and not command.args else ""
                )  # klaw chat's own words
                self._console.print(Text(visible(reply.text + help_tail), style="cyan"), highlight=False)
                return
            show_reply(self._console, self._stderr, reply)
            if reply.approval is None:
                return
            await self._answer_approval(message_id, reply.approval, session)

    def _cancel_turn(self, status: Status, ticker: asyncio.Task[None], waiting: asyncio.Task[Any] | None) -> None:
        """The first Ctrl-C while a reply is awaited: the engine is asked to stop this chat's turn (the
        `cancel_turn` query); its answer, stopped_turns.CANCELLED, ends the wait as any reply does."""
        start_cancelling(status, ticker, self._cancels, self._ask_to_cancel(waiting))

    async def _ask_to_cancel(self, waiting: asyncio.Task[Any] | None) -> None:
        """An engine that cannot be asked (down, or one older than the query) leaves the turn running: the
        terminal leaves then, as before (exit 130, the engine goes on), saying why."""
        params = {"channel": CONSOLE_CHANNEL, "chat_id": self._chat_id}
        try:
            await self.gateway.query("cancel_turn", params)
        except (EngineUnavailable, QueryFailed) as exc:
            # Only an engine that does not know the query is older (memory_forget_socket.py reads it alike); one
            # whose cancel failed says so in its own words, not "restart it to update it" (decision 506).
            older = isinstance(exc, QueryFailed) and str(exc).startswith("unknown query")
            why = OLDER_ENGINE if older else str(exc)
            self._stderr.print(Text(f"Could not cancel the turn: {why}; leaving.", style="yellow"), highlight=False)
            if waiting is not None:
                waiting.cancel()

    async def _ask_open_questions(self, session: PromptSession[str]) -> None:
        """The questions waiting in this chat when the terminal attaches (one asked before, its terminal
        left), each shown and asked as if just asked (trial48: only `/status` named them). A question
        queued for the console while none was attached comes with its frame too: asked once."""
        if not self.gateway.connected:
            return  # none to ask: a restarted engine holds no question of before
        try:
            found = await self.gateway.query("approvals", {"channel": CONSOLE_CHANNEL, "chat_id": self._chat_id})
        except (EngineUnavailable, QueryFailed):
            return
        questions = [q for q in found.get("approvals", ()) if isinstance(q, dict)]
        waiting = {str(q.get("id")) for q in questions}
        while not self._replies.empty():  # what came at hello, before the answer: its questions asked below
            if (reply := self._replies.get_nowait()).approval not in waiting:
                self._held.append(reply)
        for question in questions:
            request_id = str(question.get("id"))
            self._console.print(Text(OPEN_QUESTION, style="bold yellow"), highlight=False)
            asked = OutboundFrame(
                channel=CONSOLE_CHANNEL,
                chat_id=self._chat_id,
                text=str(question.get("text")),
                kind="notice",
                approval=request_id,
            )
            show_reply(self._console, self._stderr, asked)
            await self._answer_approval(None, request_id, session)

    async def _answer_approval(self, message_id: str | None, request_id: str, session: PromptSession[str]) -> None:
        """`y` approves, anything else denies (Enter, Ctrl-C, Ctrl-D, as in process), sent as `/approve
        ID` or `/deny ID` (the engine's answer is shown as it comes). The question ending without this
        prompt ends it, saying how: answered elsewhere, timed out (the engine says so when asked,
        `_settled`; decision 450), or the reply to `message_id` arriving first. The engine going away
        ends it too: the question went with it (a restarted engine holds none), and a `y` typed then
        would approve nothing (trial48)."""
        self._asked.add(request_id)
        asking = asyncio.create_task(ask_approval(session))
        lost = asyncio.create_task(self._link_lost())
        settled = asyncio.create_task(self._settled(request_id))
        while True:
            arriving = asyncio.create_task(self._replies.get())
            await asyncio.wait({asking, arriving, lost, settled}, return_when=asyncio.FIRST_COMPLETED)
            if arriving.done():
                reply = arriving.result()
                ended = asking.done() or lost.done() or settled.done()
                if not ended and not self._ends(reply, message_id):
                    self._show_arrival(reply)  # above the prompt: a task's answer, say
                    continue
                self._held.append(reply)
            else:
                arriving.cancel()
                await asyncio.gather(arriving, return_exceptions=True)
            break
        for watching in (lost, settled):
            if not watching.done():
                watching.cancel()
        await asyncio.gather(lost, settled, return_exceptions=True)
        if not asking.done():
            if session.app.is_running:
                session.app.exit(result="")  # the prompt line stays on screen, as answered with nothing
            else:
                asking.cancel()
            await asyncio.gather(asking, return_exceptions=True)
            if not settled.cancelled() and settled.exception() is None:
                self._console.print(Text(visible(settled.result()), style="cyan"), highlight=False)
            elif not lost.cancelled():
                self._console.print(Text(QUESTION_GONE, style="yellow"), highlight=False)
            return
        answer = asking.result()
        await self._submit(f"/{'approve' if approves(answer, request_id) else 'deny'} {request_id}")

    async def _settled(self, request_id: str) -> str:
        """How question `request_id` ended once the engine says it no longer waits (answered elsewhere, timed
        out, its turn stopped): asked every `SETTLED_SECONDS`, since the question's frame names no message
        whose reply would tell (one asked before this terminal attached). The link down, it asks again once
        back (`_link_lost` ends the prompt if it was lost); an engine that does not know the query, never."""
        while True:
            await asyncio.sleep(SETTLED_SECONDS)
            params = {"channel": CONSOLE_CHANNEL, "chat_id": self._chat_id, "id": request_id}
            try:
                found = await self.gateway.query("approval_over", params)
            except EngineUnavailable:
                continue
            except QueryFailed:  # an older engine: the prompt ends as before (the reply, the engine going)
                await asyncio.Event().wait()
            if isinstance(found, dict) and isinstance(said := found.get("over"), str):
                return said

    async def _link_lost(self) -> None:
        """Returns once the link is down (looked at as `_watch_link` does: the link has no event for it)."""
        while True:
            if not self.gateway.link.connected.is_set():
                return
            await asyncio.sleep(WATCH_SECONDS)

    def _ends(self, reply: OutboundFrame, message_id: str | None) -> bool:
        """Whether `reply` ends the y/N prompt: the turn's reply (the question timed out)."""
        return self._answers(reply, message_id) if message_id is not None else False

    async def _count_up(self, status: Status) -> None:
        """The spinner's words: the model's wait, or "waiting for the engine" while it is down."""
        started = time.monotonic()
        doing = AskedDoing(self.gateway.query, {"channel": CONSOLE_CHANNEL, "chat_id": self._chat_id})
        while True:
            await asyncio.sleep(TICK_SECONDS)
            if self.gateway.link.connected.is_set():
                await doing.refresh()  # a tool under way is named, not the model (decision 527)
                at = time.monotonic()
                status.update(waiting_text(at - started, self._model_id, self._timeout, doing.now, at))
            else:
                status.update(ENGINE_DOWN)

    @staticmethod
    def _answers(reply: OutboundFrame, message_id: str) -> bool:
        return reply.reply_to == message_id or message_id in reply.answers or reply.kind == "error"

    async def _next_reply_to(self, message_id: str) -> OutboundFrame:
        """The reply to this message, or a question to approve a tool on its way; others are shown as they come."""
        while True:
            reply = self._held.pop(0) if self._held else await self._replies.get()
            if self._answers(reply, message_id) or reply.approval is not None:
                return reply
            self._show_arrival(reply)

    async def _print_arrivals(self) -> None:
        """What comes at `you ›`; returns at a question not asked here yet, for its y/N prompt (as in process)."""
        while True:
            reply = self._held.pop(0) if self._held else await self._replies.get()
            self._show_arrival(reply)
            if reply.approval is not None and reply.approval not in self._asked and self._console.is_terminal:
                self._question = reply.approval
                return

    def _show_arrival(self, reply: OutboundFrame) -> None:
        """A message that answers nothing awaited now: the engine's answer to a command this terminal
        sent (`/approve`), or a reply to a message sent before this terminal attached, said as such."""
        if reply.kind == "notice" and reply.reply_to in self._mine:
            self._console.print(Text(visible(reply.text), style="cyan"), highlight=False)
            return
        if reply.approval is not None and reply.approval in self._asked:
            return  # asked here already (at attach)
        # Only what the engine kept while no terminal was attached (`waited`): the reply to a question
        # answered here, to a piped message, say, comes while this one is (trial48).
        away = reply.waited and reply.reply_to is not None and reply.reply_to not in self._mine and reply.task is None
        if not self._console.is_terminal:  # piped: stdout is the reply to stdin's message alone
            other = reply.reply_to is not None and reply.reply_to not in self._mine and reply.task is None
            label = WHILE_AWAY if away else OTHER_MESSAGE if other else None  # never bare, as if its own (516)
            said = reply.text if label is None else f"{label}\n{reply.text}"
            self._stderr.print(Text(visible(said)), highlight=False)
            return
        if away and reply.approval is None:
            self._console.print(Text(WHILE_AWAY, style=REPLY_LABEL_STYLE), highlight=False)
        elif _not_mine(reply, self._mine):  # labelled by where its message came from (decision 535)
            self._console.print(Text(origin_label(reply.origin), style=REPLY_LABEL_STYLE), highlight=False)
        show_reply(self._console, self._stderr, reply)

    async def _watch_link(self) -> None:
        """Say when the engine goes away and when it is back (the link reconnects by itself)."""
        link = self.gateway.link
        self._there = link.connected.is_set()
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            self._engine_is(there=link.connected.is_set())

    def _engine_is(self, *, there: bool) -> None:
        """Say the change once: the watcher and an arriving frame may both see it."""
        if self._there is None or self._there == there:
            return
        self._there = there
        with contextlib.suppress(Exception):
            self._console.print(Text(BACK if there else WENT_AWAY, style="yellow"), highlight=False)


def _shown_there(reply: OutboundFrame) -> None:
    """A piped chat beside a terminal: what is not its reply is the terminal's to show."""


def _not_mine(reply: OutboundFrame, mine: set[str]) -> bool:
    """A reply sent now to a message this terminal did not send, no task's nor another chat's: a piped
    `klaw chat`'s beside it (decision 527), an earlier terminal's, one from before a restart (535)."""
    unasked = reply.task is None and reply.sent_from is None and reply.approval is None and not reply.waited
    return unasked and reply.reply_to is not None and reply.reply_to not in mine and reply.kind != "notice"
