"""How klaw names a segment: its number within its chat, the one the web page's Memory tab shows, with
its id, the one `/forget segment` and scripts pass (decision 402): `segment 1 (id 7)`; a chat's number to
its id for `klaw memory forget --number` and `/forget segment number N` (decision 415).

Ids run across every chat of a home (a console chat, a Telegram chat and a scheduled task's log each
take the next one); the number counts one chat's segments from 1 in the order they started
(decision 275). Naming both everywhere leaves a person no doubt which of the two a figure is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from klaw.chat_listing import some_chats
from klaw.memory.forget_targets import ForgetError

if TYPE_CHECKING:
    from klaw.store.protocol import Storage
    from klaw.store.records import ChatRef


def segment_words(number: int | None, segment_id: int) -> str:
    """`segment 1 (id 7)`; `segment id 7` when the segment's chat no longer lists it."""
    return f"segment {number} (id {segment_id})" if number else f"segment id {segment_id}"


async def chat_numbers(store: Storage, chat: ChatRef) -> dict[int, int]:
    """Each segment id of `chat` and its number within the chat, 1 for its first."""
    return {segment.id: number for number, segment in enumerate(await store.segments.list(chat), start=1)}


async def number_of(store: Storage, segment_id: int) -> int | None:
    """The number of segment `segment_id` within its chat, None for an id the store does not hold."""
    segment = await store.segments.get(segment_id)
    return None if segment is None else (await chat_numbers(store, segment.chat)).get(segment_id)


async def id_of_number(store: Storage, chat: ChatRef, number: int) -> int:
    """The id of `chat`'s segment `number`; ForgetError names the numbers the chat has."""
    ids = list(await chat_numbers(store, chat))
    if 1 <= number <= len(ids):
        return ids[number - 1]
    if not ids and str(chat) not in (chats := sorted(map(str, await store.segments.chats()))):  # a typo in --chat
        names, more = some_chats(chats, str(chat))  # the closest few of thousands, not all (decision 479)
        stored = (
            f"the stored chats: {', '.join([*names, more] if more else names)}" if chats else "no chat is stored yet"
        )
        raise ForgetError(f"no chat {chat} is stored ({stored}); `klaw memory list` lists them")
    held = f"segments 1 to {len(ids)}" if len(ids) > 1 else "segment 1" if ids else "no segment"
    raise ForgetError(
        f"{chat} has no segment number {number}: it has {held}; `klaw memory list --chat {chat}` shows"
        " each one's number and id"
    )
