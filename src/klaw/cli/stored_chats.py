"""The rule that a command naming a chat names one that has talked with klaw: `klaw schedule add
--inject-into` and `klaw mcp serve --chat` refuse a chat with no messages at start, with the same
sentence, instead of accepting a mistyped id (runs nobody reads; an MCP client that finds nothing and
saves into a new chat).

The sentence names the closest few of a home's chats, not thousands (klaw.chat_listing)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from klaw.chat_listing import some_chats
from klaw.cli.context import fail, open_store_or_exit

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.home import KlawHome
    from klaw.store.protocol import Storage
    from klaw.store.records import ChatRef


async def chats_with_messages(home: KlawHome, config: EngineConfig) -> list[ChatRef]:
    """The stored chats with at least one message, read from klaw.db (none when a SQLite home has no klaw.db
    yet, nor in a PostgreSQL database klaw never set up, both left as they are: decisions 442, 450, 467)."""
    from klaw.store.errors import StoreNotSetUp

    try:
        store = await open_store_or_exit(home.database_file(config.database.path), config.database, reads_only=True)
    except StoreNotSetUp:  # left as it is: no chat there yet (decision 467)
        return []
    try:
        return [chat for chat in await store.segments.chats() if await _has_messages(store, chat)]
    finally:
        await store.aclose()


async def _has_messages(store: Storage, chat: ChatRef) -> bool:
    """Whether a message a model may be shown is left in the chat: one whose every segment was forgotten
    (`klaw memory forget segment … --yes`) keeps its segments and the forget's control record, and was
    listed among the chats with messages (newcomer20). Newest segment first, one row each at most."""
    for segment in reversed(await store.segments.list(chat)):
        if await store.messages.count_in_segment(segment.id, at_most=1):
            return True
    return False


def require_chat_with_messages(target: ChatRef, chats: Iterable[ChatRef], remedy: str) -> None:
    """Exit 2 unless `target` is one of `chats`, listing them and saying `remedy` (how to go on)."""
    known = set(chats)
    if target in known:
        return
    names, more = some_chats(known, str(target))
    listing = "the chats with messages: " + ", ".join([*names, more] if more else names)
    listing = listing if known else "no chat has messages yet"
    fail(f"no chat {target} has any messages ({listing}). {remedy}")
