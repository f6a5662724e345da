"""The console channel: a person chatting with the engine in a terminal (`klaw chat`).

prompt_toolkit gives line editing, persistent history and bracketed paste (a pasted block of
several lines arrives as one message); rich shows replies and a spinner while the model thinks.
Replies arrive through the engine's delivery for the `console` channel and are printed above the
prompt, so a scheduled message can appear while the person is typing.
"""

from __future__ import annotations

import asyncio
import getpass

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.markdown import Markdown

from klaw.channels.console_keys import KeysWhileThinking
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.store.records import ChatRef

CONSOLE_CHANNEL = "console"
EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}


def console_chat() -> ChatRef:
    """One console chat per OS user, so each person on a shared machine has their own memory."""
    return ChatRef(CONSOLE_CHANNEL, getpass.getuser() or "local")


class ConsoleChannel:
    def __init__(self, engine: Engine, console: Console | None = None) -> None:
        self._engine = engine
        self._console = console or Console()
        self._replies: asyncio.Queue[Outbound] = asyncio.Queue()
        self._keys = KeysWhileThinking()
        engine.delivery.register(CONSOLE_CHANNEL, self._replies.put)

    async def run(self) -> None:
        chat = console_chat()
        history = FileHistory(str(self._engine.home.root / "chat_history"))
        session: PromptSession[str] = PromptSession(history=history)
        self._console.print(
            f"[bold]klaw[/bold] — model {self._engine.config.routing.default}. "
            "Type /help for commands, /exit or Ctrl-D to leave."
        )
        with patch_stdout(raw=True):
            while True:
                printer = asyncio.create_task(self._print_arrivals())
                try:
                    text = await session.prompt_async(
                        "you › ", pre_run=lambda: self._keys.replay(session.app.key_processor)
                    )
                except (EOFError, KeyboardInterrupt):
                    break
                finally:
                    printer.cancel()
                    await asyncio.gather(printer, return_exceptions=True)
                if not text.strip():
                    continue
                if text.strip().lower() in EXIT_WORDS:
                    break
                await self._exchange(chat, text)
                if self._keys.leave:  # Ctrl-D while the model was thinking
                    break

    async def _print_arrivals(self) -> None:
        """While the person is at the prompt, show what arrives on its own (a scheduled task's answer)."""
        while True:
            self._show(await self._replies.get())

    async def _exchange(self, chat: ChatRef, text: str) -> None:
        result = await self._engine.submit(chat, text)
        if result.command_reply is not None:
            self._console.print(result.command_reply, style="cyan", highlight=False)
            return
        with self._console.status("thinking…", spinner="dots"), self._keys.watching():
            reply = await self._next_reply_to(result.message_id)
        self._show(reply)

    async def _next_reply_to(self, message_id: str | None) -> Outbound:
        """The reply to this message; other messages that arrive first are shown as they come."""
        while True:
            reply = await self._replies.get()
            if reply.reply_to == message_id or reply.kind == "error":
                return reply
            self._show(reply)

    def show_pending(self) -> None:
        """Print replies that arrived after the prompt closed: a person who pressed Ctrl-C while the
        model was thinking still sees the answer the engine finished during its shutdown."""
        while not self._replies.empty():
            self._show(self._replies.get_nowait())

    def _show(self, reply: Outbound) -> None:
        if reply.kind == "error":
            self._console.print(reply.text, style="red", highlight=False)
        else:
            self._console.print(Markdown(reply.text))
