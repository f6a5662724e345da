"""`klaw mcp serve`: one chat's memory for another MCP client, over stdio or streamable HTTP (docs/mcp.md).

With an engine answering on the home's socket, every call goes to it; with none, this process opens
the home itself (it is then the home's engine until it exits). Over stdio, stdout is the protocol:
everything klaw says goes to stderr.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Annotated

import typer

from klaw.cli.context import err_console, fail, home_from_env, load_or_exit
from klaw.home import KlawHome
from klaw.home_lock import running_command

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.config import EngineConfig
    from klaw.mcp_server.memory_link import MemoryLink
    from klaw.store.records import ChatRef

DEFAULT_PORT = 8766
CHECK_THE_ID = "Check the id: klaw mcp serve shares the memory of a chat that has talked with klaw."

app = typer.Typer(rich_markup_mode="markdown", help="klaw and the Model Context Protocol.", no_args_is_help=True)


@app.command()
def serve(
    chat: Annotated[
        str, typer.Option("--chat", help="The chat whose memory is shared, as channel:chat_id (e.g. telegram:123).")
    ],
    allow_write: Annotated[
        bool, typer.Option("--allow-write", help="Offer memory_save too (default: read-only).")
    ] = False,
    http: Annotated[
        bool,
        typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 (bearer: the web token) instead of stdio."),
    ] = False,
    port: Annotated[
        int | None,
        typer.Option("--port", help=f"HTTP port (0: any free one; default {DEFAULT_PORT}).", min=0, max=65535),
    ] = None,
) -> None:
    """Share one chat's memory with another MCP client (memory_search, fetch_conversation_details,
    memory_core_get; memory_save with --allow-write)."""
    from klaw.scheduling.names import parse_chat_target

    home = home_from_env()
    config = load_or_exit(home).config  # a broken engine.yaml is said now, not at the first call
    try:
        target = parse_chat_target(chat)
    except ValueError as exc:
        fail(str(exc))
    if port is not None and not http:  # stdio has no port: say so rather than ignore it
        fail(f"--port is for --http: add --http to serve on 127.0.0.1:{port}, or drop --port for stdio")
    with running_command("klaw mcp serve"):  # what the home's lock says while this opens the home itself
        asyncio.run(
            _serve(
                home, config, target, allow_write=allow_write, http=http, port=DEFAULT_PORT if port is None else port
            )
        )


async def _serve(
    home: KlawHome, config: EngineConfig, chat: ChatRef, *, allow_write: bool, http: bool, port: int
) -> None:
    from klaw.mcp_server.server import build_server, serve_http

    link = await _link(home, config, chat)
    try:
        await _refuse_a_chat_without_messages(link, chat)
    except BaseException:
        await link.aclose()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = build_server(link, chat, allow_write=allow_write)
    mode = "read and write" if allow_write else "read-only"
    try:
        if http:
            from klaw.channels.web.token import load_or_create_token

            def ready(bound: int) -> None:
                err_console.print(
                    f"klaw mcp serve: http://127.0.0.1:{bound}/mcp, memory of {chat} ({mode}); bearer token:"
                    f" the web token in {home.web_token_file}"
                )

            await serve_http(server, load_or_create_token(home), port, stop, ready)
        else:
            err_console.print(f"klaw mcp serve: stdio, memory of {chat} ({mode})")
            serving = asyncio.create_task(server.run_stdio_async())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not serving.done():
                serving.cancel()
            await asyncio.gather(serving, stopping, return_exceptions=True)
    finally:
        await link.aclose()


async def _refuse_a_chat_without_messages(link: MemoryLink, chat: ChatRef) -> None:
    """A mistyped --chat used to be served: searches found nothing, silently, and memory_save started
    that chat. The rule and sentence are `klaw schedule add --inject-into`'s (cli/stored_chats.py)."""
    from klaw.cli.stored_chats import require_chat_with_messages

    try:
        chats = await link.chats()
    except (OSError, EOFError, TimeoutError) as exc:
        fail(f"klaw mcp serve: the engine stopped answering while this started ({type(exc).__name__}); try again")
    require_chat_with_messages(chat, chats, CHECK_THE_ID)


async def _link(home: KlawHome, config: EngineConfig, chat: ChatRef) -> MemoryLink:
    from klaw.engine_presence import engine_answers, held_message, home_holder
    from klaw.home_lock import ENGINE_ROLE
    from klaw.mcp_server.memory_link import LibraryMemory, SocketMemory

    if await engine_answers(home.socket_path):
        err_console.print(f"klaw mcp serve: using the engine running on {home.socket_path}")
        return SocketMemory(home, chat)
    holder = await home_holder(home)
    if holder is not None:  # an engine that does not listen (a library program), or maintenance
        library = (
            "; a program using klaw as a library shares the home only when it opens it with"
            " Klaw(home, listen=True): docs/mcp.md"
            if holder.role in ("", ENGINE_ROLE)
            else ""
        )
        fail(f"klaw mcp serve: {held_message(home, holder)} (it does not answer on {home.socket_path}{library})")
    # Asked of the store as it is before the home is opened: opening it starts an engine, which sets up
    # klaw.db, scheduler.db and engine.lock, and a home never started then refused all the same (adversary27
    # L1, decision 478). The read sets nothing up (decision 467), on either backend.
    from klaw.cli.stored_chats import chats_with_messages, require_chat_with_messages

    require_chat_with_messages(chat, await chats_with_messages(home, config), CHECK_THE_ID)
    err_console.print(f"klaw mcp serve: no engine runs on {home.root}; opening it in this process")
    try:
        return await LibraryMemory.open(home, chat)
    except (OSError, RuntimeError, ValueError) as exc:
        fail(f"cannot open {home}: {exc}")
