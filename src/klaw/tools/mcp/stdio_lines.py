"""A command server's stdio, as the MCP SDK's `stdio_client` does it, with a bounded line reader.

The SDK's reader joined each piece of the server's output to what it had so far and split the whole again
at every piece: a server writing without a line end (adversary6 hostile_mcp.py: a megabyte at a time,
forever) made that re-scan grow without end, ~1.4 CPUs of the engine's process for the call's 30 s, and
every other chat ten times slower meanwhile. Here a line is looked for only in the bytes just read, and
one longer than the cap (overflow.py, 16 MB) ends the connection: the reader stops (reading no more of it,
so the server blocks on its full pipe), the pending call gets the connection's end, and the link says why
in its refusal and restarts the server (`Overflow`, decision 298).

A line that is not a JSON-RPC message (a server printing its debug log to stdout, a common mistake) is
dropped with one warning per connection that names neither the line nor its content. The SDK's parser
logged each such line at ERROR with pydantic's traceback quoting it (adversary12: 6,215 tracebacks and
5.7 MB of klaw's log in 50 s, a token the server printed among them) and handed the session an
exception it has no use for.

Everything else is the SDK's own code (its process start in a new session, the spec's shutdown sequence
with every wait bounded), called by its private names (checked by sdk_stdio.py, decision 310): what this
replaces is its `stdout_reader` alone.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TextIO

import anyio
import anyio.lowlevel
from mcp import StdioServerParameters
from mcp.client import stdio as sdk
from mcp.shared.message import SessionMessage

from klaw.tools.mcp.line_message import Unreadable, line_message
from klaw.tools.mcp.overflow import Overflow

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

log = logging.getLogger(__name__)

_WRITER_FLUSH_TIMEOUT = 0.5  # the SDK's: for the writer to flush accepted messages before stdin closes


async def _lines(stdout: anyio.abc.ByteReceiveStream, overflow: Overflow) -> AsyncIterator[bytes]:
    """The server's lines (without their line end), each found by scanning only the bytes just read;
    stops, setting `overflow`, at a line longer than its limit."""
    buffer = bytearray()  # the start of a line whose end has not come yet: never holds a line end
    async for piece in stdout:
        scan = len(buffer)
        buffer += piece
        start = 0
        while (end := buffer.find(b"\n", scan)) >= 0:
            if end - start > overflow.limit:
                overflow.kind = "line"
                return
            yield bytes(buffer[start:end])
            start = scan = end + 1
        if start:
            del buffer[:start]
        if len(buffer) > overflow.limit:
            overflow.kind = "line"
            return


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters,
    errlog: TextIO,
    overflow: Overflow,
    name: str,
    on_exit: Callable[[int | None], None] = lambda code: None,
) -> AsyncIterator[TransportStreams]:
    """`mcp.client.stdio.stdio_client` with `_lines` as its reader (module docstring); `name`, the server's
    in engine.yaml, is what a warning calls it. `on_exit` is told the process's exit status as soon as it
    ends, whether or not its stdout ended (a child it started may hold that open): a call pending then is
    ended at once by the link (decision 514)."""
    command = await sdk._get_executable_command(server.command)
    process = await sdk._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    shutting_down = False
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout, "Opened process is missing stdout"
        try:
            async with read_stream_writer:
                try:
                    stray_said = False
                    async for line in _lines(process.stdout, overflow):
                        text = line.decode(server.encoding, errors=server.encoding_error_handler)
                        message = line_message(text)
                        if isinstance(message, Unreadable):
                            overflow.kind, overflow.detail = "unreadable", message.why
                            break
                        if message is None:
                            if not stray_said and text.strip():
                                stray_said = True
                                log.warning(
                                    "the MCP server '%s' wrote to its stdout a line that is not a JSON-RPC"
                                    " message; such lines are dropped (a server's own log belongs on stderr,"
                                    " which klaw keeps in KLAW_HOME/mcp/%s.log)",
                                    name,
                                    name,
                                )
                            continue
                        try:
                            await read_stream_writer.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return
                    if overflow.happened:
                        log.warning("the MCP server '%s' %s: its connection ends", name, overflow.words())
                finally:
                    if not overflow.happened:  # a flooding server is left blocked on its pipe until it is stopped
                        await sdk._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                log.exception("Reading from the MCP server's stdout failed mid-session")

    async def stdin_writer() -> None:
        assert process.stdin, "Opened process is missing stdin"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (json + "\n").encode(encoding=server.encoding, errors=server.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await sdk._stop_server_process(process)
        await sdk._aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async def exit_watcher() -> None:
        on_exit(await process.wait())

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        tg.start_soon(exit_watcher)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):  # the server must be stopped even when the caller is cancelled
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
