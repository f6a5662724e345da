"""The prompts `klaw chat` draws, in process and attached alike: `you ›` and `approve? [y/N]`.

One place for how a prompt is asked and what its keys mean, so the two consoles cannot differ: Ctrl-C on a
typed line clears it, on an empty `you ›` leaves, at `approve? [y/N]` denies (docs/tools.md, decision 441).
A question that arrives while `you ›` waits (the turn a restart resumed asks again, decision 463) closes
that prompt so the console can ask it at its own y/N prompt, not print it under `you ›` as a line to read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from klaw.channels import console_cancel
from klaw.command_syntax import parse_command

if TYPE_CHECKING:  # imported where a prompt is drawn: a piped chat needs neither (decision 316)
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings

EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}
APPROVE_PROMPT = "approve? [y/N] › "


async def ask_at_prompt(session: PromptSession[str], message: str, pre_run: Callable[[], None] | None = None) -> str:
    """Ask at the prompt, stdout patched only meanwhile: what is printed while it waits (a scheduled
    task's answer, a log line) goes above it, and what was printed before it is on screen already.
    SIGINT stays the chat's (console_cancel.py): prompt_toolkit's own handler, swapped in and out at each
    prompt, left a window where a Ctrl-C was lost (decision 496)."""
    from prompt_toolkit.patch_stdout import patch_stdout

    ctrl_c = console_cancel.current()
    with patch_stdout(raw=True):
        if ctrl_c is None:
            return await session.prompt_async(message, pre_run=pre_run, handle_sigint=False)
        with ctrl_c.at_prompt(session.app) as taking_keys:

            def started() -> None:
                if pre_run is not None:
                    pre_run()  # what was typed meanwhile first, then a Ctrl-C owed
                taking_keys()

            return await session.prompt_async(message, pre_run=started, handle_sigint=False)


async def ask_approval(session: PromptSession[str]) -> str:
    """The y/N answer; "" (no) for Ctrl-D and Ctrl-C. Caught here, since the consoles ask it in a task of
    its own: a KeyboardInterrupt out of a task stops the event loop, and `klaw chat` ended with a traceback
    at `asyncio.run`'s shutdown, exit 130, the question's call cut off (newcomer18)."""
    try:
        return await ask_at_prompt(session, APPROVE_PROMPT)
    except (EOFError, KeyboardInterrupt):
        return ""


async def next_message(
    session: PromptSession[str],
    print_arrivals: Callable[[], Coroutine[Any, Any, None]],
    pre_run: Callable[[], None] | None = None,
) -> str | None:
    """The next message typed at `you ›`, what arrives meanwhile printed above the prompt; None to leave
    (/exit, Ctrl-D, Ctrl-C on an empty line). Blank lines are asked again. `print_arrivals` returns when
    something came that the prompt must give way to (a question to ask at `approve? [y/N]`): the prompt
    closes and "" is returned, for the caller to ask it. One loop for both consoles."""
    while True:
        try:
            text, gave_way = await _prompt_beside(session, print_arrivals, pre_run)
        except (EOFError, KeyboardInterrupt):
            return None
        if gave_way and not text.strip():
            return ""
        if text.strip():
            return None if text.strip().lower() in EXIT_WORDS else text


async def _prompt_beside(
    session: PromptSession[str],
    print_arrivals: Callable[[], Coroutine[Any, Any, None]],
    pre_run: Callable[[], None] | None,
) -> tuple[str, bool]:
    """One `you ›` with `print_arrivals` beside it: what was typed (EOFError or KeyboardInterrupt raised), and
    whether `print_arrivals` returned, closing the prompt, whichever of the two was up first."""
    printer = asyncio.create_task(print_arrivals())

    def give_way(*_: object) -> None:
        future = session.app.future
        if printer.done() and not printer.cancelled() and future is not None and not future.done():
            session.app.exit(result="")

    def started() -> None:
        if pre_run is not None:
            pre_run()
        give_way()  # it returned before the prompt was up: `exit` is allowed from here on

    printer.add_done_callback(give_way)
    try:
        text = await ask_at_prompt(session, "you › ", pre_run=started)
    finally:
        printer.cancel()
        await asyncio.gather(printer, return_exceptions=True)
    return text, printer.done() and not printer.cancelled()


def approves(answer: str, request_id: str) -> bool:
    """Whether the answer at the approval prompt is a yes: `y`, `yes`, or `/approve` alone or with this
    question's id (what the question says to type). `/approve` naming another id is no yes to this one."""
    if answer.strip().lower() in {"y", "yes"}:
        return True
    command = parse_command(answer)
    return command is not None and command.name == "approve" and command.args in {"", request_id}


def ctrl_c_clears_a_typed_line() -> KeyBindings:
    """Ctrl-C with something typed clears the line, as in a shell; on an empty line it leaves the chat
    (prompt_toolkit's own Ctrl-C raises KeyboardInterrupt whatever was typed, losing it and the chat)."""
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()

    @bindings.add("c-c")
    def _(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return bindings
