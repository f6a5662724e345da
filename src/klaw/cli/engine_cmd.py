"""`klaw engine` (the engine alone, for gateways) and `klaw chat` (engine + console in one process)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from klaw import event_loop
from klaw.cancellation import take_back_cancellation
from klaw.cli.chat_input import piped_message, read_piped, said_without_engine, skills_folder
from klaw.cli.context import (
    HOME_HELD_EXIT,
    err_console,
    fail,
    home_from_env,
    load_or_exit,
    load_or_why,
    require_home,
    start_engine_or_exit,
    stderr_console,
    stdout_console,
)
from klaw.cli.model_at_start import cancelled_on_failure, check_in_background, say_check, set_where
from klaw.cli.piped_wait import PipedWait
from klaw.cli.stopping import FINISHING, say_starting, stopped_as_by_ctrl_c_while_starting, stopping
from klaw.command_syntax import parse_command
from klaw.console_logging import logs_through
from klaw.home import KlawHome
from klaw.home_lock import PIPED_CHAT, running_command

if TYPE_CHECKING:
    from klaw.channels.console_kept import KeptMessages
    from klaw.config_loader import LoadedConfig
    from klaw.engine.delivery import Outbound
    from klaw.engine.runtime import Engine
    from klaw.home_lock import Holder


def engine() -> None:
    """Run the engine: stores, model calls and the socket gateways connect to (engine.sock)."""
    with stopped_as_by_ctrl_c_while_starting():
        home = home_from_env()
        loaded = load_or_exit(home)
        say_starting("klaw engine", home)
        event_loop.run(_serve(home, loaded))


async def _serve(home: KlawHome, loaded: LoadedConfig) -> None:
    console = stderr_console()
    checking = check_in_background(loaded, "klaw engine")
    with cancelled_on_failure(checking):
        running = await start_engine_or_exit(home, loaded)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        console.print(f"klaw engine listening on {home.socket_path}")
        await say_check(checking, console, stop)
        await stop.wait()
        stopping(running, console)
    finally:
        await running.shutdown()


def chat(
    skip_check: Annotated[bool, typer.Option("--skip-check", help="Do not check that the model answers.")] = False,
) -> None:
    """Chat with your agent in this terminal: engine and console in one process, or, when klaw serve
    or klaw engine already runs on this home, attached to that engine. With a message piped in
    (echo "…" | klaw chat), print only its reply and exit."""
    from klaw.channels.console import CONSOLE_CHANNEL, ConsoleChannel, console_chat
    from klaw.channels.console_keys import KeysWhileThinking
    from klaw.channels.console_prompt import EXIT_WORDS
    from klaw.channels.console_tty import terminal_kept
    from klaw.cli.chat_start_wait import ToolsWait, started_without_waiting

    home = home_from_env()
    found = load_or_why(home)
    piped = not sys.stdin.isatty()

    async def run() -> None:
        with terminal_kept():
            await chat_in_this_terminal()

    async def chat_in_this_terminal() -> None:
        waiting = PipedWait(home, lambda line: err_console.print(line, highlight=False))
        attach_to = await _refuse_a_running_engine(home, waiting)
        if attach_to is not None:  # an engine answers on engine.sock: talk to it (decision 430)
            from klaw.cli.chat_attach import chat_attached

            await chat_attached(home, _attachable(home, found, attach_to), attach_to)
            return
        if isinstance(found, str):
            fail(found)  # no engine to talk to: this chat would start one on the file as it is now
        loaded, config = found, found.config
        # What is typed while klaw starts waits for the first prompt, as what is typed while the model
        # thinks: in the terminal's own line mode a paste was cut at its 4,095-character limit and sent.
        keys = KeysWhileThinking()
        with contextlib.ExitStack() as starting:
            starting.enter_context(keys.watching())
            if not skip_check:
                # Imported here, not at the command's start: a chat attached to a running engine makes no
                # model check, and these bring httpx (with the CLI httpx loads) and the model catalogue (520).
                from klaw.cli.chat_model import chat_model
                from klaw.llm.preflight import model_check

                # the model this chat will use: its own /model choice outlives the process
                chosen = await chat_model(home, config, console_chat())
                check = await model_check(
                    config.model(chosen.model_id), chosen.model_id, set_where=set_where(loaded), chosen=chosen.chosen
                )
                if check.refusal:
                    fail(check.refusal)
                if check.doubt:
                    err_console.print(Text.assemble(("warning:", "yellow"), f" {check.doubt}"), highlight=False)
            # `echo "…" | klaw chat`: one message. Input that cannot be one (empty, not UTF-8, too long) is
            # refused before the engine starts, after what would stop any chat (engine, model, home).
            data = read_piped()
            piped = ""
            if data is not None:
                require_home(home)
                piped, refusal = piped_message(data)
                if refusal is not None:
                    fail(refusal)  # a usage error: exit 2, nothing sent or stored
                if piped.strip().lower() in EXIT_WORDS:
                    return  # `echo /exit | klaw chat` leaves as typed (decision 282), no engine started (376)
                if said_without_engine(
                    piped, config.commands, skills_folder(home, config)
                ):  # a typo, /help: no engine (431)
                    return
            # Log lines go to KLAW_HOME/logs/chat.log from before the engine starts (a resumed message, an MCP
            # server that cannot start), not onto the screen above the banner; printed through the console
            # that draws the spinner and the prompt, never into them. A piped run's stdout is its reply
            # alone: the line saying where the log is goes to stderr.
            console = stdout_console()
            with logs_through(console if data is None else err_console, home.chat_log_file):
                # At a terminal the console takes the replies a crash left unshown, sent again at start; a
                # piped run prints only its own reply, so those wait for the next terminal session.
                replies: asyncio.Queue[Outbound] = asyncio.Queue()
                channels = {CONSOLE_CHANNEL: replies.put} if data is None else None
                # The MCP servers are waited for by the first message to the model, not by the start: the
                # prompt, /exit and the commands come at once. A piped chat is one turn: it waits longer
                # (docs/mcp.md, decisions 252, 376).
                try:
                    running = await start_engine_or_exit(
                        home,
                        loaded,
                        channels,
                        config=started_without_waiting(config),
                        held_exit=2,
                        wait_if_held=waiting.until_free if data is not None else None,
                        one_message=console_chat() if data is not None else None,
                    )
                finally:
                    starting.close()
                wait = config.mcp.start_wait_seconds if data is None else config.mcp.one_turn_wait_seconds()
                tools_wait = ToolsWait(running, wait, piped=data is not None)
                await _warn_of_held_names_no_tool_has(running)
                kept = await _kept_by_an_attached_terminal(home, piped=data is not None)
                channel = ConsoleChannel(running, console, replies, keys=keys, before_turn=tools_wait, kept=kept)
                interrupted = failed = False
                try:
                    if data is None:
                        await channel.run()
                    else:
                        failed = not await channel.answer_piped(piped)
                        if parse_command(piped) is None:  # the reply is out: its vectors and the message's (499)
                            await running.embed_what_waits()
                except asyncio.CancelledError:
                    # Ctrl-C while the model thinks: asyncio.run cancelled this task. Take the cancel back so
                    # the shutdown below is an ordinary one, then exit 130 as after any Ctrl-C.
                    take_back_cancellation()
                    interrupted = True
                finally:
                    # Said after a Ctrl-C, or when the console ends with work under way. A piped message's
                    # reply is out already: its stderr stays empty while background work (a summary) ends.
                    processor = running.processor
                    busy = processor.slots.in_use or processor.waiting_chats or processor.turns_under_way
                    if busy and (interrupted or data is None):
                        err_console.print(FINISHING)
                    await running.shutdown()
                    channel.show_pending()
        if interrupted:
            raise typer.Exit(130)
        if failed:
            raise typer.Exit(1)

    with running_command(PIPED_CHAT) if piped else contextlib.nullcontext():  # told apart (decision 487)
        event_loop.run(run())


def _attachable(home: KlawHome, found: LoadedConfig | str, holder: Holder) -> LoadedConfig:
    """What an attached chat reads of engine.yaml (its slash commands, the model's timeout): the file, or,
    while the file is not valid, the defaults, said once on stderr. The engine runs on what it read at its
    start; the file matters at its next start (check52: the chat exited 2 beside a running engine)."""
    if not isinstance(found, str):
        return found
    from klaw.config import EngineConfig
    from klaw.config_loader import LoadedConfig

    mend = "mend it before klaw next starts (klaw config check)"
    said = f"warning: talking to {holder.describe()}, which runs on what it read at its start; {mend}:\n{found}"
    err_console.print(Text(said, style="yellow"), highlight=False)
    return LoadedConfig(config=EngineConfig(), sources={}, path=home.config_file)


async def _kept_by_an_attached_terminal(home: KlawHome, *, piped: bool) -> KeptMessages | None:
    """What an attached `klaw chat` kept while its engine was down (console_kept.py): sent by this chat at
    a terminal; a piped one says where it waits (trial48: it waited for an attach that might never come)."""
    from klaw.channels.console_kept import WAITING, KeptMessages, kept_where

    kept = await KeptMessages.open(home.gateway_dir)
    if kept is None or not piped:
        return kept
    said = WAITING.format(n=len(kept.buffer), where=kept_where(home.gateway_dir))
    err_console.print(Text(said, style="yellow"), highlight=False)
    return None


async def _warn_of_held_names_no_tool_has(running: Engine) -> None:
    """`klaw config check`'s warning for a misspelt `tools.approval` name, at the chat's start too: the tool
    meant runs unasked, and nothing else on screen said so (on stderr: a piped reply stays alone on stdout)."""
    from klaw.channels.console import console_chat
    from klaw.cli.config_cmd import approval_warning

    model = await running.sessions.model_of(console_chat())
    for row in running.tool_listing.not_tool_rows(model):
        err_console.print(Text(approval_warning(row), style="yellow"), highlight=False)


async def _refuse_a_running_engine(home: KlawHome, waiting: PipedWait) -> Holder | None:
    """The engine to attach to when one answers on engine.sock (`klaw serve`, `klaw engine`: decision 430);
    else exit 2 when an engine runs on the home, saying how to talk to it and how to end it, in the words
    of the command that runs it (decision 259): `klaw chat` runs an engine of its own, and a home has
    one. A `klaw chat` is left, not talked to on a web page it does not serve. A web page a gateway
    serves is named at the address it really listens on (newcomer9: the refusal said "start `klaw
    gateway`" beside a running one, and named engine.yaml's port where a KLAW__ variable set another). A
    `klaw serve` or `klaw engine` not listening yet is starting: waited for (`_once_listening`)."""
    from klaw.engine_presence import STOP_AN_ENGINE, engine_answers, home_holder, how_to_stop
    from klaw.home_lock import ENGINE_ROLE, LIBRARY
    from klaw.served_page import served_page

    while (holder := await home_holder(home)) is not None and holder.command == PIPED_CHAT:
        if not await waiting.until_free() and waiting.expired:  # a piped chat ends once answered (487)
            fail(waiting.timed_out(), HOME_HELD_EXIT)
    if holder is None or (holder.role and holder.role != ENGINE_ROLE):
        return None  # maintenance (klaw reindex) is refused by the engine's start with its own words
    who, where, stop = holder.describe(), home.root, how_to_stop(holder)
    if holder.command == "klaw chat":
        fail(f"another {who} is using {where}: {stop}, or go on talking to your agent there")
    if holder.command == "klaw mcp serve":
        fail(f"{who} has opened {where} for an MCP client and takes no chat messages: {stop}")
    # A `klaw chat` serves its console in process (a second terminal's replies would go there), and an
    # MCP server takes no chat; any other engine answering on the socket is talked to from here.
    if await engine_answers(home.socket_path):
        return holder
    page = await served_page(home)
    if page is not None:
        fail(f"{who} runs on {where}, and its web page is served at {page}: talk to your agent there, or {stop}")
    if holder.command in ("klaw serve", "klaw engine"):  # not listening yet: starting (a restart after a crash)
        return await _once_listening(home, holder)
    if holder.command == LIBRARY:
        fail(f"{who} has opened {where}: it takes no messages from other programs; {stop}")
    talk = "it takes no messages from other programs (a program using klaw's library API)"
    fail(f"klaw chat starts its own engine, and {who} runs on {where}: {talk}. Or {STOP_AN_ENGINE}.")


async def _once_listening(home: KlawHome, holder: Holder) -> Holder | None:
    """`klaw serve` or `klaw engine` holding the home, not answering on engine.sock yet: it is starting (a
    service restarted after a crash takes seconds to listen). Wait a bounded time and attach; None (start an
    engine here) when it ended meanwhile; else exit 75, "try again in a moment", never "kill it" (decision 475)."""
    from klaw import engine_presence

    who, where, seconds = holder.describe(), home.root, engine_presence.STARTING_WAIT_SECONDS
    err_console.print(f"{who} is starting on {where}: waiting for it to answer (up to {seconds:g} s)", highlight=False)
    try:
        return await engine_presence.wait_for_listening(home, seconds)
    except TimeoutError:
        fail(f"{who} is still starting on {where}: try again in a moment (it answers once started)", HOME_HELD_EXIT)
