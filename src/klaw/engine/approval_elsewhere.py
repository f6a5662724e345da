"""Which chat may answer an approval question asked in another, and what a chat that may not is told
(decision 525, item 2).

newcomer23 had `approve? [y/N]` open in `klaw chat` and typed `/approve 209e` on the web page: "No approval
request '209e' is waiting in this chat". Both are the owner's own channels: the console is a terminal on this
machine, the web page opens only with the owner's token. So a question asked in one of them may be answered
from the other (or another chat of them). A Telegram chat is allow-listed, and may be another person: it
answers only its own questions, and a question asked there is answered there, not from the owner's page.

An owner's chat asked about a question it may not answer is told where it waits; any other chat is told only
what it was told before (nothing of another chat's questions: their tools are that chat's business).
Imports nothing of the engine but records.
"""

from __future__ import annotations

from collections.abc import Sequence

from klaw.store.records import ChatRef

OWNER_CHANNELS = frozenset({"console", "web"})  # the terminal, and the page behind the owner's token


def may_answer(asked_in: ChatRef, answering: ChatRef) -> bool:
    """Whether `answering` may answer a question asked in `asked_in`: itself, or both are the owner's."""
    return asked_in == answering or (asked_in.channel in OWNER_CHANNELS and answering.channel in OWNER_CHANNELS)


def waits_there(request_id: str, tool: str, asked_in: ChatRef, answering: ChatRef) -> str | None:
    """`209e (file_write) waits in telegram:42: answer it there.`, said to an owner's chat only; else None."""
    if answering.channel not in OWNER_CHANNELS:
        return None
    return (
        f"Not answered: {request_id} ({tool}) waits in {asked_in}, which may be another person's chat: answer it there."
    )


def waiting_elsewhere(answering: ChatRef, others: Sequence[tuple[str, str, ChatRef]]) -> str | None:
    """For a bare `/approve` in an owner's chat where nothing waits: the questions of the owner's other chats
    (`209e (file_write) waits in console:root`), which `/approve ID` here answers; None when there are none."""
    if answering.channel not in OWNER_CHANNELS:
        return None
    mine = [f"{i} ({tool}) waits in {chat}" for i, tool, chat in others if may_answer(chat, answering)]
    return "; ".join(mine) or None


def which(verb: str, chat: ChatRef, waiting: list[str], others: Sequence[tuple[str, str, ChatRef]] = ()) -> str:
    """The questions waiting in `chat` (`Waiting: 3f2a, 09bc. Answer /approve ID.`); with none there, an
    owner's chat is told those of the owner's other chats, which it may answer."""
    if waiting:
        return f"Waiting: {', '.join(waiting)}. Answer /{verb} ID."
    if (elsewhere := waiting_elsewhere(chat, others)) is not None:
        return f"No approval request is waiting in this chat; {elsewhere}. Answer /{verb} ID here or there."
    return "No approval request is waiting in this chat."
