"""`klaw chat` beside a running engine: this terminal becomes a client of it on engine.sock (decision 430).

`klaw chat` opened an engine of its own and was refused beside `klaw serve` or `klaw engine`; now, when
an engine answers on the home's socket, it attaches instead (console_attached.py): the same chat,
console:<user>, through the gateway protocol the web page uses. Leaving (/exit, Ctrl-D, Ctrl-C) leaves
the engine running. One terminal at a time: a second is refused while the first is attached, since the
engine sends the `console` channel's replies to one connection. No model check: the running engine
made its own at its start, with its own settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from klaw.ascii_digits import digits
from klaw.cancellation import take_back_cancellation
from klaw.channels.console_kept import kept_where
from klaw.cli.chat_input import piped_message, read_piped, said_without_engine, skills_folder
from klaw.cli.context import HOME_HELD_EXIT, err_console, fail, stdout_console
from klaw.cli.piped_wait import PIPED_WAIT_SECONDS
from klaw.console_logging import logs_through
from klaw.private_files import open_private, private_dirs

if TYPE_CHECKING:
    from klaw.config_loader import LoadedConfig
    from klaw.home import KlawHome
    from klaw.home_lock import Holder

_POLL_SECONDS = 0.2
CONNECT_WAIT_SECONDS = 10.0  # how long the start waits for the engine's answer before saying it does not


@contextlib.asynccontextmanager
async def one_terminal(
    directory: Path, who: str, where: Path, *, piped: bool = False, wait_seconds: float = PIPED_WAIT_SECONDS
) -> AsyncIterator[bool]:
    """Held while this chat is attached; yields whether a piped chat goes beside an attached terminal.
    Another terminal is refused (exit 2). A piped chat beside a terminal sends its message into that chat
    at once, the terminal showing it (True; decision 527: it waited up to 5 minutes for the terminal to
    leave, then exit 75). Beside another piped chat, it waits for that one's reply, up to `wait_seconds`,
    saying so on stderr, then exit 75 (decision 502)."""
    private_dirs(directory)
    fd = open_private(directory / "attached.lock", os.O_RDWR | os.O_CREAT)
    try:
        if not _took(fd):
            if not piped:
                fail(f"another `klaw chat` is attached to {who} on {where}: leave it first (/exit or Ctrl-D)")
            holder = _holder(fd)
            if "terminal" in holder:
                yield True
                return
            await _wait_for(fd, holder, f"{who} on {where}", wait_seconds)
        os.ftruncate(fd, 0)  # who holds it, for a piped chat that finds it held
        os.pwrite(fd, f"{os.getpid()} {'piped' if piped else 'terminal'}\n".encode(), 0)
        yield False
    finally:
        os.close(fd)


def _took(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(fd: int) -> str:
    """ "a `klaw chat` terminal (pid N) is" or "another piped `klaw chat` (pid N) is", from the lock file."""
    pid, _, kind = os.pread(fd, 64, 0).decode("ascii", "replace").strip().partition(" ")
    of = f" (pid {pid})" if pid.isdigit() else ""
    return f"another piped `klaw chat`{of} is" if kind == "piped" else f"a `klaw chat` terminal{of} is"


def pipe_folder(directory: Path) -> Path:
    """A private folder (0700) for the buffer of a pipe beside a terminal, named by this process's id. Those of
    pipes whose process is gone are removed first: a pipe killed (a cron job's timeout, SIGTERM) never reached
    its own clean-up and left its folder, its message inside, for good (decision 528)."""
    for old in directory.glob("piped-*-*"):
        pid = old.name.split("-")[1]
        if digits(pid) and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"piped-{os.getpid()}-", dir=directory))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


async def _wait_for(fd: int, holder: str, engine: str, seconds: float) -> None:
    """Until the attached chat leaves; exit 75 after `seconds`, the message not sent."""
    err_console.print(
        f"{holder} attached to {engine}: waiting for it to leave (up to {seconds:g} s; it ends with its reply)",
        highlight=False,
    )
    deadline = time.monotonic() + seconds
    while not _took(fd):
        if time.monotonic() >= deadline:
            fail(
                f"not sent: {holder} still attached to {engine} after {seconds:g} s; send it there, or later",
                HOME_HELD_EXIT,
            )
        await asyncio.sleep(_POLL_SECONDS)


async def chat_attached(home: KlawHome, loaded: LoadedConfig, holder: Holder) -> None:
    """Chat with the engine `holder` runs, in this terminal or for one piped message; the engine goes on after."""
    from klaw.channels.console import console_chat
    from klaw.channels.console_attached import AttachedConsole
    from klaw.channels.console_attached_pipe import WATCHING_SINCE, older_engine
    from klaw.channels.console_prompt import EXIT_WORDS
    from klaw.gateway.service import Gateway

    data = read_piped()
    piped = ""
    if data is not None:
        piped, refusal = piped_message(data)
        if refusal is not None:
            fail(refusal)  # a usage error: exit 2, nothing sent
        if piped.strip().lower() in EXIT_WORDS:
            return
        if said_without_engine(
            piped, loaded.config.commands, skills_folder(home, loaded.config)
        ):  # a typo (exit 1), /help (decision 431)
            return
    config = loaded.config
    model_id = config.routing.default
    timeout = config.models[model_id].timeout_seconds if model_id in config.models else 120.0
    console = stdout_console()
    who = holder.describe()
    directory = kept_where(home.gateway_dir)
    channel = AttachedConsole(console, console_chat().chat_id, model_id, timeout)
    interrupted = False
    status = 0
    logs = logs_through(console if data is None else err_console, home.chat_log_file)
    async with one_terminal(directory, who, home.root, piped=data is not None) as beside:
        kept = pipe_folder(directory) if beside else directory
        gateway = Gateway(home, [channel], buffer_dir=kept, watch_only=beside)
        with logs:
            await gateway.start()
            gateway.link.outage.said_on_screen()  # the console says "The engine stopped." itself (decision 464)
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CONNECT_WAIT_SECONDS):
                        await gateway.link.connected.wait()
                if not gateway.connected:
                    err_console.print(
                        Text(f"{who} on {home.root} does not answer yet; what you send is kept until it does"),
                        style="yellow",
                        highlight=False,
                    )
                if beside:  # only an engine of protocol 2 sends a pipe beside a terminal its reply (decision 535)
                    await gateway.link.connected.wait()
                    if gateway.link.engine_protocol < WATCHING_SINCE:
                        fail(older_engine(who, home.root), 1)
                if data is None:
                    banner = Text.assemble(
                        ("klaw", "bold"),
                        f" — attached to the running engine, {who}, on {home.root}. Type /help for commands,"
                        " /exit or Ctrl-D to leave (the engine goes on).",
                    )
                    await channel.run(banner, home.root / "chat_history")
                else:
                    status = await channel.answer_piped(piped, beside_terminal=beside)
            except asyncio.CancelledError:  # Ctrl-C while a reply is awaited: leave, the engine goes on
                take_back_cancellation()
                interrupted = True
            finally:
                await gateway.stop()
                if beside:  # the terminal holds the chat's own folder: this pipe kept its message in one of its own
                    shutil.rmtree(kept, ignore_errors=True)
                else:  # beside a terminal, what else came is the terminal's to show
                    channel.show_pending()
    if interrupted:
        shown = "in the attached terminal" if beside else "at your next klaw chat"
        err_console.print(f"Left; the engine goes on, and a reply still to come is shown {shown}.")
        raise typer.Exit(130)
    if status:
        raise typer.Exit(status)
