"""The console channel: a person chatting with the engine in a terminal (`klaw chat`).

prompt_toolkit gives line editing, history (`console_history.py`: only slash commands are kept on disk)
and bracketed paste (a pasted block of several lines arrives as one message); rich shows replies and a
spinner while the model thinks. Text a person or the model wrote is printed as `Text` (or Markdown for
replies), never as rich markup, and log lines are printed through the same console.
Output goes to the terminal directly, except while a prompt is on screen: only then is stdout patched
(console_prompt.py's `ask_at_prompt`) so that what arrives is drawn above the prompt. Patched all along,
text printed just before a prompt (the approval question, a reply) went through prompt_toolkit's flush
thread, and on a busy machine that thread ran after the prompt was drawn: the question showed after the
prompt, or only once the person pressed a key.
Replies arrive through the engine's delivery for the `console` channel and are printed above the
prompt, so a scheduled message can appear while the person is typing. A question to approve a held
tool (engine/approval.py) stops the spinner, or closes `you ›` (a turn resumed at start asks again),
and asks `approve? [y/N]`; the answer goes to the engine as `/approve ID` or `/deny ID` while the turn
that asked waits for it.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Protocol

from rich.console import Console
from rich.text import Text

from klaw.channels.console_cancel import ChatCtrlC, start_cancelling
from klaw.channels.console_kept import SENDING
from klaw.channels.console_keys import KeysWhileThinking
from klaw.channels.console_prompt import (
    EXIT_WORDS,
    approves,
    ask_approval,
    ctrl_c_clears_a_typed_line,
    next_message,
)
from klaw.channels.console_waiting import count_up
from klaw.command_syntax import ENGINE_COMMANDS, Described, help_text, parse_command, unknown_command
from klaw.message_text import MessageRefused
from klaw.store.records import ChatRef
from klaw.terminal_text import visible

if TYPE_CHECKING:  # imported where a prompt is drawn: a piped chat needs neither (decision 316)
    from prompt_toolkit import PromptSession
    from rich.status import Status

    from klaw.channels.console_history import ConsoleHistory
    from klaw.channels.console_kept import KeptMessages

    # Types only: `echo /exit | klaw chat` reads EXIT_WORDS here and leaves before any engine (decision 378).
    from klaw.engine.delivery import Outbound
    from klaw.engine.runtime import Engine

CONSOLE_CHANNEL = "console"
LEAVING_HELP = "/exit — Leave klaw chat (also /quit or Ctrl-D)"
EARLIER_RUN_REPLY = "Reply to a message from before klaw last stopped:"
REPLY_LABEL_STYLE = "bold cyan"  # whose reply (a subagent the model named…): never approval_mark.BOX_COLOUR (543)


class BeforeTurn(Protocol):
    """What a message (not a command) waits for before it goes to the engine (`klaw chat`'s `ToolsWait`)."""

    @property
    def owed(self) -> bool: ...

    async def before_turn(self) -> None: ...


def answered_without_engine(
    text: str,
    commands: Iterable[Described],
    skills: Callable[[], Collection[str]] = frozenset,
    callable_skills: Callable[[], Collection[str]] | None = None,  # /help's: `skills` when None
    skipped: Callable[[], Collection[str]] = tuple,  # folders a rule left out: `/Upper` is told why (decision 543)
) -> tuple[str, bool] | None:
    """A piped command `klaw chat` answers before it starts an engine, as it leaves at `/exit` (decision
    431): a name no command or skill has, in the engine's words (False: exit 1, a script's typo must not pass),
    and `/help`, engine.yaml's list with the skills and `/exit`. None for anything else: a message, a skill's
    call (`skills`: the skills folder's names, a turn runs: decision 529), or a command that reads the engine.
    The typo waited seconds for the engine and its MCP servers only to be told it was one."""
    command = parse_command(text)
    if command is None:
        return None
    if command.name not in ENGINE_COMMANDS:
        names = skills()
        if command.name in names:
            return None
        return unknown_command(command.name, [*ENGINE_COMMANDS, *names], skipped()), False
    if command.name == "help":
        listed = help_text(commands, command.args, (callable_skills or skills)(), skipped())
        return listed + ("" if command.args else f"\n{LEAVING_HELP}"), True
    return None


def console_chat() -> ChatRef:
    """One console chat per OS user, so each person on a shared machine has their own memory."""
    return ChatRef(CONSOLE_CHANNEL, getpass.getuser() or "local")


class ConsoleChannel:
    def __init__(
        self,
        engine: Engine,
        console: Console | None = None,
        replies: asyncio.Queue[Outbound] | None = None,
        keys: KeysWhileThinking | None = None,
        before_turn: BeforeTurn | None = None,
        kept: KeptMessages | None = None,
    ) -> None:
        """`replies`: the queue already registered as the console's sink when the engine started
        (`Engine.start(channels=...)`), holding the replies it sent again at start; `keys`: what was typed
        while klaw started, for the first prompt; `before_turn`: awaited before a message (not a command)
        goes to the engine: `klaw chat`'s wait for MCP servers still starting (decision 376); `kept`: what
        an attached terminal kept while its engine was down, sent before the first prompt (console_kept.py)."""
        self._engine = engine
        self._console = console or Console(markup=False)
        self._stderr = Console(stderr=True, markup=False, soft_wrap=not self._console.is_terminal)
        self._replies: asyncio.Queue[Outbound] = replies if replies is not None else asyncio.Queue()
        self._keys = keys or KeysWhileThinking()
        self._before_turn = before_turn
        self._kept = kept
        self._history: ConsoleHistory | None = None  # made by `run`: a piped chat has no prompt to recall
        self._question: str | None = None  # a question that came at `you ›`, for its y/N prompt
        self._cancels: set[asyncio.Task[bool]] = set()  # turns a Ctrl-C is cancelling
        self._ctrl_c = ChatCtrlC()  # SIGINT's one handler while `run` runs (console_cancel.py)
        engine.delivery.register(CONSOLE_CHANNEL, self._replies.put)

    async def run(self) -> None:
        with self._ctrl_c.installed():
            await self._run()

    async def _run(self) -> None:
        from prompt_toolkit import PromptSession

        from klaw.channels.console_history import ConsoleHistory

        chat = console_chat()
        self._history = ConsoleHistory(self._engine.home.root / "chat_history")
        session: PromptSession[str] = PromptSession(history=self._history, key_bindings=ctrl_c_clears_a_typed_line())
        model = await self._engine.sessions.model_of(chat)  # its own /model choice, else routing.default
        greeting = Text.assemble(
            ("klaw", "bold"),
            f" — model {model}. Type /help for commands, /exit or Ctrl-D to leave.",
        )
        self._console.print(greeting, highlight=False)
        for n, (message_id, kept) in enumerate(self._kept.of(chat) if self._kept is not None else ()):
            if not n:
                self._console.print(Text(SENDING, style="yellow"), highlight=False)
            self._console.print(Text(f"you › {visible(kept)}", style="dim"), highlight=False)
            await self._exchange(chat, kept, session, message_id)
        # Log lines go to KLAW_HOME/logs/chat.log (`klaw chat` routes them there from before the engine
        # starts: `logs_through`), printed through this console: above the spinner and the prompt.
        while not self._keys.leave:  # Ctrl-D pressed while klaw started or the model was thinking
            text = await next_message(
                session, self._print_arrivals, pre_run=lambda: self._keys.replay(session.app.key_processor)
            )
            if text is None:
                break
            if self._question is not None:  # came at `you ›`: asked as one the spinner met would be
                request_id, self._question = self._question, None
                await self._answer_approval(chat, request_id, session)
            if text:
                await self._exchange(chat, text, session)

    async def answer_piped(self, text: str) -> bool:
        """`echo "…" | klaw chat`: all of stdin is one message, and only its reply is printed, as the
        model wrote it (no banner, spinner or prompt: prompt_toolkit drawing them into a pipe gave ^M
        and repeated prompts). A tool held for approval is not run, since no one is at a terminal to
        answer, and the model is told so (not that the person denied it); the reply goes on without it.
        False when the reply is an error (exit 1)."""
        chat = console_chat()
        if text.strip().lower() in EXIT_WORDS:  # /help lists /exit: piped, it leaves as typed (decision 282)
            return True
        command = parse_command(text)
        called = False  # `/skill args`: a turn, as a message's (decision 529)
        if command is not None and not self._engine.commands.knows(command.name):
            answer = await self._engine.commands.answer(chat, command.name, command.args)
            called = answer.skill_call
            if not called:  # said on stderr and exit 1, as an error reply is: a script's typo must not pass (282)
                self._stderr.print(Text(visible(answer.text), style="red"), highlight=False)
                return False
        if (command is None or called) and self._before_turn is not None:
            await self._before_turn.before_turn()
        # All of stdin is this one message: no other can join it, so its turn starts at once rather than after
        # processing.debounceMs of silence (1.5 s of every piped chat's wall time), as a library ask's does
        # (decision 499); unless this chat already has work under way (messages a crash left unanswered,
        # resumed at start): then it waits as before, after their turn and its reply.
        alone = not self._engine.processor.has_under_way(chat)
        result = await self._engine.submit(chat, text)
        if result.command_reply is not None:
            said = result.command_reply + (
                f"\n{LEAVING_HELP}" if command is not None and command.name == "help" and not command.args else ""
            )
            self._console.out(self._shown(said), highlight=False)
            return True
        if alone:
            self._engine.processor.answer_now(chat)
        while True:
            reply = await self._next_reply_to(result.message_id)
            if reply.approval is None:
                break
            from klaw.channels.console_markdown import reply_markdown  # the question as a terminal shows it

            # What was asked, without its last line, the `/approve ID or /deny ID (no answer within …)` nobody
            # here can type (newcomer13; the question's shape is engine/approval.py's `question`).
            asked = reply.text.rpartition("\n")[0] or reply.text
            self._stderr.print(reply_markdown(asked))
            ended = self._engine.approvals.nobody_can_answer(chat, reply.approval)
            self._stderr.print(Text(visible(ended)), highlight=False)
        if reply.kind == "error":
            self._stderr.print(Text(visible(reply.text), style="red"), highlight=False)
            return False
        self._console.out(self._shown(reply.text), highlight=False)
        return True

    async def _print_arrivals(self) -> None:
        """While the person is at the prompt, show what arrives on its own: a scheduled task's answer, or
        the reply to a message of an earlier run (one the engine resumed, or sent again because the crash
        came before it was shown), said as such so it is not read as an answer to nothing. A question to
        approve a tool (the resumed turn asking again) is shown and returned for its y/N prompt: printed
        under `you ›`, its `y` went to the engine as a message that waited behind it (newcomer18)."""
        while True:
            reply = await self._replies.get()
            self._show_arrival(reply)
            if reply.approval is not None and self._console.is_terminal:
                self._question = reply.approval
                return

    def _show_arrival(self, reply: Outbound) -> None:
        """A message that answers nothing typed now: a reply to an earlier run's message says so first
        (at the prompt, or while the spinner waits for another reply: then it would read as that one's)."""
        earlier = reply.reply_to is not None and reply.task is None and reply.approval is None
        if not self._console.is_terminal:
            # Piped, stdout is the reply to stdin's message alone (a script reads it): what else arrives
            # meanwhile, a scheduled task's answer or a message from another chat, goes to stderr (newcomer13).
            from klaw.engine.frames import unasked_label  # the engine's loaded it by now (decision 378)

            label = EARLIER_RUN_REPLY if earlier else unasked_label(reply.task, reply.spawned, reply.sent_from)
            said = reply.text if label is None else f"{label}\n{reply.text}"
            self._stderr.print(Text(visible(said)), highlight=False)
            return
        if earlier:
            self._console.print(Text(EARLIER_RUN_REPLY, style=REPLY_LABEL_STYLE), highlight=False)
        self._show(reply)

    async def _exchange(self, chat: ChatRef, text: str, session: PromptSession[str], kept: str | None = None) -> None:
        """`kept`: the id of a message an attached terminal kept, out of its buffer once the engine has it."""
        command = parse_command(text)  # a skill's call (not a command the engine knows) runs a turn too (529)
        turn = command is None or not self._engine.commands.knows(command.name)
        if self._before_turn is not None and self._before_turn.owed and turn:
            with self._console.status("starting MCP servers…", spinner="dots"), self._keys.watching():
                await self._before_turn.before_turn()
        try:
            result = await self._engine.submit(chat, text, kept)
        except MessageRefused as exc:  # a paste too long for one message: said, and the prompt comes back
            self._console.print(Text(f"Not sent: {exc}", style="red"), highlight=False)
            return
        finally:
            if kept is not None and self._kept is not None:
                await self._kept.sent(kept)
        if result.command_reply is not None:
            command = parse_command(text)
            if command is not None and command.name == "forget" and self._history is not None:
                self._history.forget_messages()
            said = result.command_reply
            if command is not None and command.name == "help":
                said += f"\n{LEAVING_HELP}"  # klaw chat's own words, never sent to the engine
            # Text, not markup: a reply quotes what a person or the model wrote ("[urgent] call mom").
            self._console.print(Text(visible(said), style="cyan"), highlight=False)
            return
        model = await self._engine.sessions.model_of(chat)
        timeout = self._engine.config.model(model).timeout_seconds
        while True:
            with self._console.status("thinking…", spinner="dots") as status, self._keys.watching():
                doing = functools.partial(self._engine.tools.running_in, chat)
                ticker = asyncio.create_task(count_up(status, model, timeout, doing=doing))
                try:
                    with self._ctrl_c.cancels(functools.partial(self._cancel_turn, chat, status, ticker)):
                        reply = await self._next_reply_to(result.message_id)
                finally:
                    ticker.cancel()
                    await asyncio.gather(ticker, return_exceptions=True)
            self._show(reply)
            if reply.approval is None:
                return
            await self._answer_approval(chat, reply.approval, session)

    def _cancel_turn(self, chat: ChatRef, status: Status, ticker: asyncio.Task[None]) -> None:
        """The first Ctrl-C while a turn runs (console_cancel.py): the spinner says so, and the chat's turn is
        stopped as `/forget` stops it, told as cancelled; its answer ends the wait for the reply."""
        start_cancelling(status, ticker, self._cancels, self._engine.cancel_turn(chat))

    async def _answer_approval(self, chat: ChatRef, request_id: str, session: PromptSession[str]) -> None:
        """y, yes, or the `/approve` the question itself offers approves; anything else (Enter, /deny,
        Ctrl-C, Ctrl-D) denies. The engine's answer is shown. A question that ends without an answer (its
        timeout, the engine stopping) ends the prompt with a line saying so, and the reply follows at once;
        before, the prompt stayed up, and a `y` typed later was told no such request was waiting."""
        asking = asyncio.create_task(ask_approval(session))
        over = asyncio.create_task(self._engine.approvals.ended(request_id))
        await asyncio.wait({asking, over}, return_when=asyncio.FIRST_COMPLETED)
        if not asking.done():  # over without the answer typed here
            if session.app.is_running:
                session.app.exit(result="")  # the prompt line stays on screen, as answered with nothing
            else:
                asking.cancel()
            await asyncio.gather(asking, return_exceptions=True)
            said = over.result()
            if said is not None:
                self._console.print(Text(visible(said), style="cyan"), highlight=False)
            return
        over.cancel()
        answer = await asking
        command = "approve" if approves(answer, request_id) else "deny"
        reply = await self._engine.commands.handle(chat, command, request_id)
        self._console.print(Text(visible(reply), style="cyan"), highlight=False)

    async def _next_reply_to(self, message_id: str | None) -> Outbound:
        """The reply to this message, or a question to approve a tool on its way; other messages that
        arrive first are shown as they come."""
        while True:
            reply = await self._replies.get()
            if reply.reply_to == message_id or reply.kind == "error" or reply.approval is not None:
                return reply
            self._show_arrival(reply)

    def show_pending(self) -> None:
        """Print replies that arrived after the prompt closed: a person who pressed Ctrl-C while the
        model was thinking still sees the answer the engine finished during its shutdown."""
        while not self._replies.empty():
            self._show(self._replies.get_nowait())

    def _shown(self, text: str) -> str:
        """A piped reply as the model wrote it into a file or a pipe; on a terminal, its control
        characters shown rather than obeyed (terminal_text.py)."""
        return visible(text) if self._console.is_terminal else text

    def _show(self, reply: Outbound) -> None:
        show_reply(self._console, self._stderr, reply)


class ShownReply(Protocol):
    """What a console shows of a reply: the engine's `Outbound` in process, an `outbound` frame when
    attached to a running engine (console_attached.py)."""

    @property
    def text(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def task(self) -> str | None: ...
    @property
    def spawned(self) -> bool: ...
    @property
    def sent_from(self) -> str | None: ...
    @property
    def tools(self) -> tuple[str, ...]: ...
    @property
    def approval(self) -> str | None: ...


MARKDOWN_MAX_CHARS = 100_000
"""A longer reply is shown as its text, control characters made visible, not drawn as Markdown: rich's
wrapping of a paragraph costs the square of its length (1.5 MB: 4 s, 3 MB: 14 s, on a quiet machine), and
nobody reads a reply that long for its formatting."""


def show_reply(console: Console, stderr: Console, reply: ShownReply) -> None:
    """A reply, an error or a question to approve a tool, its control characters shown and never
    obeyed: a reply or a tool's arguments must not clear the screen or overwrite the question."""
    from klaw.engine.frames import tools_used, unasked_label  # the engine's loaded it by now (decision 378)

    label = unasked_label(reply.task, reply.spawned, reply.sent_from)
    if label is not None:  # a task's answer, a message from another chat: say whose, as the web page does
        console.print(Text(visible(label), style=REPLY_LABEL_STYLE), highlight=False)
    if reply.tools:  # what the turn called on its way to this answer, as the web page lists it
        console.print(Text(visible(tools_used(reply.tools)), style="dim"), highlight=False)
    if reply.kind == "error":
        console.print(Text(visible(reply.text), style="red"), highlight=False)
    elif reply.kind == "notice" and not console.is_terminal:  # stdout is the reply alone
        stderr.print(Text(visible(reply.text)), highlight=False)
    elif not console.is_terminal:  # piped: as the model wrote it, as the reply itself (Markdown pads)
        console.out(reply.text, highlight=False)
    elif len(reply.text) > MARKDOWN_MAX_CHARS:  # rich wraps a long paragraph in time square to its length
        console.out(visible(reply.text), highlight=False)  # the terminal wraps it (decision 452)
    else:
        from klaw.channels.console_markdown import reply_markdown  # markdown-it: only a terminal's replies

        if reply.approval is None:
            console.print(reply_markdown(reply.text))
        else:  # klaw's own question, in a frame a reply cannot draw (decision 532)
            from klaw.channels.approval_mark import approval_panel

            console.print(approval_panel(reply_markdown(reply.text)))
