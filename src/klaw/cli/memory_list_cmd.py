"""`klaw memory list`: a chat's segments, exchanges and saved memories with the ids `klaw memory
forget` takes.

Each segment with its number within the chat (the web page's) and its id (decision 402), dates and
message count, then its exchanges: id, time, status and the first
words of the person's message; then the memories the agent saved in the chat, oldest first, each with
its id (the one `/memory` shows, kept by `klaw reindex`: decision 245), time and first words. Text is
printed literally (never rich markup).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from klaw.cli.context import fail, open_store_or_exit, stdout_console, stored_home_or_exit
from klaw.errors import KlawError
from klaw.memory.segment_numbers import chat_numbers, segment_words
from klaw.terminal_text import visible

if TYPE_CHECKING:  # loaded by the command itself, so `klaw --help` loads none of it
    from klaw.config import DatabaseConfig
    from klaw.store.protocol import Storage
    from klaw.store.records import ChatRef

    ChatPicker = Callable[[Storage, str | None], Awaitable[ChatRef]]

FIRST_WORDS = 60


def register_list(app: typer.Typer, pick_chat: ChatPicker) -> None:
    @app.command(name="list")
    def list_command(
        chat: Annotated[
            str | None,
            typer.Option("--chat", help="The chat, e.g. web:main (default: your console chat, or the only chat)."),
        ] = None,
    ) -> None:
        """A chat's segments, exchanges and saved memories: ids (for klaw memory forget), dates, first words."""
        _, loaded, path = stored_home_or_exit()
        try:
            lines = asyncio.run(_listing(path, loaded.config.database, chat, pick_chat))
        except KlawError as exc:
            fail(str(exc), code=1)
        console = stdout_console(highlight=False)
        for line in lines:
            console.print(line)


async def _listing(path: Path, database: DatabaseConfig, chat_arg: str | None, pick_chat: ChatPicker) -> list[Text]:
    store = await open_store_or_exit(path, database, reads_only=True)
    try:
        chat = await pick_chat(store, chat_arg)
        lines = [Text(f"{chat}", style="bold")]
        numbers = await chat_numbers(store, chat)
        for segment in await store.segments.list(chat):
            # The zone right after the times it belongs to: "09:00 UTC (current)", not "09:00 (current) UTC".
            ended = f" – {segment.ended_at:%Y-%m-%d %H:%M} UTC" if segment.ended_at else " UTC (current)"
            count = await store.messages.count_in_segment(segment.id)
            named = segment_words(numbers.get(segment.id), segment.id)
            lines.append(Text(f"{named}: {segment.started_at:%Y-%m-%d %H:%M}{ended}, {count} message(s)"))
            exchanges = await store.exchanges.for_segment(segment.id)
            rowids = [e.user_message_rowid for e in exchanges if e.user_message_rowid is not None]
            by_rowid = {m.rowid: m for m in await store.messages.by_rowids(rowids)} if rowids else {}
            for exchange in exchanges:
                said = by_rowid.get(exchange.user_message_rowid) if exchange.user_message_rowid else None
                lines.append(
                    Text(f"  exchange {exchange.id}: {exchange.started_at:%Y-%m-%d %H:%M} {exchange.status.value}:")
                    + Text(f" {_first_words(said.record.content if said else '')}")
                )
        return lines + await _saved_memories(store, chat, numbers)
    finally:
        await store.aclose()


async def _saved_memories(store: Storage, chat: ChatRef, numbers: dict[int, int]) -> list[Text]:
    total = await store.memory_chunks.count(chat)
    if not total:
        return [Text("saved memories: none (the agent saves one when asked to remember something)")]
    lines = [Text(f"saved memories: {total}", style="bold")]
    for memory in reversed(await store.memory_chunks.latest(chat, total)):
        at = f"{memory.created_at:%Y-%m-%d %H:%M}, {segment_words(numbers.get(memory.segment_id), memory.segment_id)}"
        lines.append(Text(f"  memory {memory.memory_id}: {at}:") + Text(f" {_first_words(memory.content)}"))
    return lines


def _first_words(content: str) -> str:
    words = visible(" ".join(content.split()))
    return words if len(words) <= FIRST_WORDS else words[: FIRST_WORDS - 1] + "…"
