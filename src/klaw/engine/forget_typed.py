"""What `/forget` typed in a chat names: `last`, an exchange, a segment or a saved memory by its id, or a
segment by the number the chat's page shows (`/forget segment number 2`, decision 415).

A bare figure after `segment` stays the id (decision 402: an existing habit keeps erasing what it did);
the page's number takes the word `number`, which no id can be read as. The chat is the one typed in.
"""

from __future__ import annotations

from klaw.memory.forget_targets import ForgetError, ForgetKind, shown_word, typed_target, whole_number
from klaw.memory.forgetting import Forgetting
from klaw.store.records import ChatRef

FORGET_USAGE = (
    "usage: /forget last | /forget exchange <id> | /forget segment <id> | /forget segment number <n>"
    " | /forget memory <id>"
)


async def forget_target(forgetting: Forgetting, chat: ChatRef, args: str) -> tuple[ForgetKind, int | str]:
    """The kind and id `args` name in `chat`; ForgetError with the usage when they name nothing."""
    words = args.lower().split()
    if words == ["last"]:
        return ForgetKind.EXCHANGE, await forgetting.latest_exchange(chat)
    if words == ["segment", "number"]:
        raise ForgetError(
            "which segment? Give its number: /forget segment number N (the Memory tab and `klaw memory list`"
            " show the numbers)"
        )
    if len(words) == 3 and words[:2] == ["segment", "number"]:
        return ForgetKind.SEGMENT, await forgetting.segment_of_number(chat, _number(words[2]))
    if len(words) != 2 or words[0] not in {k.value for k in ForgetKind}:
        raise ForgetError(FORGET_USAGE)
    kind = ForgetKind(words[0])
    try:
        return kind, typed_target(kind, words[1])
    except ForgetError as exc:
        if kind is ForgetKind.MEMORY:  # its refusal says what a memory's id looks like now
            raise
        raise ForgetError(f"{exc}; {FORGET_USAGE}") from None  # which word is wrong, then the whole form


def _number(typed: str) -> int:
    number = whole_number(typed)
    if number is None:
        raise ForgetError(
            "a segment's number is a whole number from 1, as the Memory tab and `klaw memory list` show it,"
            f" not {shown_word(typed)}"
        )
    return number
