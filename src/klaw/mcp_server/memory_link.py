"""Where `klaw mcp serve` gets a chat's memory from: the running engine over its socket, or, when none
runs, an engine of its own opened on the home through the library API.

Over the socket each call is one `memory_tool` query (engine/memory_access.py) on a connection that
never says hello, so no chat's replies are routed to it; calls are serialised on it, and a connection
the engine closed (it restarted) is opened again once before the call is given up. In-process the
same tools run on `Klaw(home, listen=True)`: while `klaw mcp serve` holds the home it is the engine
(gateways can connect to it, and a second engine would be refused), so klaw.db still has one owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import TYPE_CHECKING, Any, Protocol

from klaw.engine.frames import FrameReader, QueryFrame, encode_frame
from klaw.engine.one_query import EngineRefused, result_for
from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.store.records import ChatRef

if TYPE_CHECKING:  # the engine's modules (the store, numpy, the tools): imported by `LibraryMemory.open` alone,
    from klaw.library import Klaw  # so forwarding to a running engine loads none of them (decision 457)

QUERY_TIMEOUT_SECONDS = 60.0


class MemoryUnavailable(KlawError, RuntimeError):
    """The engine cannot be reached for this call; the message says what to do."""


class MemoryLink(Protocol):
    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """(text, is_error) of one shared memory tool for the chosen chat."""
        ...

    async def chats(self) -> list[ChatRef]:
        """The chats with messages, to refuse at start a chat that has none (a mistyped id)."""
        ...

    async def aclose(self) -> None: ...


class SocketMemory:
    """A running engine's memory through `engine.sock`."""

    def __init__(self, home: KlawHome, chat: ChatRef) -> None:
        self._path = home.socket_path
        self._chat = chat
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._reader: FrameReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        params = {"channel": self._chat.channel, "chat_id": self._chat.chat_id, "name": name, "arguments": arguments}
        async with self._lock:
            try:
                data = await self._ask(params)
            except EngineRefused as exc:
                await self._drop()
                raise MemoryUnavailable(f"klaw's engine refused this MCP server's connection: {exc}") from None
            except (OSError, EOFError, TimeoutError):
                await self._drop()  # the engine restarted, or the connection went stale: once more
                try:
                    data = await self._ask(params)
                except (OSError, EOFError, TimeoutError) as exc:
                    await self._drop()
                    raise MemoryUnavailable(
                        f"klaw's engine is not answering on {self._path} ({type(exc).__name__}): start it"
                        " (klaw serve or klaw engine), or restart this MCP server to open the home itself"
                    ) from None
        return str(data.get("text", "")), bool(data.get("is_error", False))

    async def chats(self) -> list[ChatRef]:
        async with self._lock:
            data = await self._ask({}, query="chats")
        listed = data.get("chats", [])
        return [ChatRef(str(c["channel"]), str(c["chat_id"])) for c in listed if isinstance(c, dict)]

    async def _ask(self, params: dict[str, Any], query: str = "memory_tool") -> dict[str, Any]:
        if self._writer is None:
            reader, self._writer = await asyncio.open_unix_connection(str(self._path))
            self._reader = FrameReader(reader)
        assert self._reader is not None
        frame_id = f"mcp-{next(self._ids)}"
        self._writer.write(encode_frame(QueryFrame(id=frame_id, query=query, params=params)))
        await self._writer.drain()
        async with asyncio.timeout(QUERY_TIMEOUT_SECONDS):
            frame = await result_for(self._reader, frame_id)
        if frame.error is not None:
            return {"text": frame.error, "is_error": True}
        return frame.data if isinstance(frame.data, dict) else {}

    async def _drop(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def aclose(self) -> None:
        await self._drop()


class LibraryMemory:
    """The home opened in this process (no engine was running)."""

    def __init__(self, klaw: Klaw, chat: ChatRef) -> None:
        self._klaw = klaw
        self._chat = chat

    @classmethod
    async def open(cls, home: KlawHome, chat: ChatRef) -> LibraryMemory:
        from klaw.library import Klaw

        return cls(await Klaw(home, listen=True).start(), chat)

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        access = self._klaw.engine.memory_access
        assert access is not None
        result = await access.call(self._chat, name, arguments)
        return result.content, result.is_error

    async def chats(self) -> list[ChatRef]:
        return list(await self._klaw.engine.store.segments.chats())

    async def aclose(self) -> None:
        await self._klaw.aclose()
