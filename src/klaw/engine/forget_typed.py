"""What `/forget` typed in a chat names: `last`, an exchange, a segment or a saved memory by its id, or a
segment by the number the chat's page shows (`/forget segment number 2`, decision 415).

A bare figure after `segment` stays the id (decision 402: an existing habit keeps erasing what it did);
the page's number takes the word `number`, which no id can be read as. The chat is the one typed in.

A segment of more than one message is not erased at once (newcomer23: `/forget segment number 1` erased 98
messages, and `/forget segment 1` another segment): the answer says what would go (its messages, exchanges,
first and last dates), which segment that is by number and by id, and to send the same words with `confirm`
(`/embeddings rebuild`'s step, decision 526). The question names no content: it stays in the chat's history,
which the erasure would not reach.
"""

from __future__ import annotations

from klaw.memory.forget_targets import ForgetError, ForgetKind, shown_word, typed_target, whole_number
from klaw.memory.forgetting import ForgetPlan, Forgetting
from klaw.store.records import ChatRef

FORGET_USAGE = (
    "usage: /forget last | /forget exchange <id> | /forget segment <id> | /forget segment number <n>"
    " | /forget memory <id>"
)
CONFIRM = "confirm"


def confirmed(args: str) -> tuple[str, bool]:
    """`args` without a last word `confirm`, and whether it was there."""
    words = args.split()
    if words and words[-1].lower() == CONFIRM:
        return " ".join(words[:-1]), True
    return args, False


async def question_first(forgetting: Forgetting, chat: ChatRef, args: str, plan: ForgetPlan) -> str | None:
    """What to ask before erasing `plan` (a segment of more than one message), or None to erase it now."""
    if plan.kind is not ForgetKind.SEGMENT or plan.messages <= 1:
        return None
    times = sorted(m.record.created_at for m in plan.records)
    span = f"{times[0]:%Y-%m-%d %H:%M} to {times[-1]:%Y-%m-%d %H:%M} UTC" if times else "no date"
    said = f"/forget {' '.join(args.split())}"
    lines = [
        f"{said} would erase {plan.said}: {plan.describe()}, from {span}. Nothing is erased yet: send"
        f" `{said} {CONFIRM}` to erase it for good."
    ]
    words = args.lower().split()
    if len(words) == 2 and (number := whole_number(words[1])) is not None:  # the id; the page's number differs?
        try:
            numbered = await forgetting.segment_of_number(chat, number)
        except ForgetError:
            numbered = None
        if numbered is not None and numbered != plan.target_id:
            lines.append(
                f"`/forget segment {number}` takes a segment's id; the segment the Memory tab and `klaw memory list`"
                f" number {number} is id {numbered}: `/forget segment number {number}` names that one."
            )
    return "\n".join(lines)


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
