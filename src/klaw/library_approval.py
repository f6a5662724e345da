"""A question to approve a held tool, answered for a program's `Klaw` by its `approve=` callback.

The engine asks its question as a notice to the chat (engine/approval.py); for the library's chats, and an
`ask` waiting in another channel's, the notice comes here. The callback's True runs the call, False denies it
(the model reads that the person denied it). Anything else leaves it unrun as a question nobody answered,
never as a denial by a person who saw nothing (decision 538): no callback at all (the model reads "nobody
was asked" as it does beside a piped `klaw chat`); a callback that raised (before, the exception was lost in
its task, "Task exception was never retrieved", and the turn waited the whole approval timeout, five
minutes by default); a callback that answered something other than True or False (a truthy "no" ran the
tool). The program learns of a fault in its callback by a warning on the `klaw.library` logger naming the
exception's type and where it was raised, not its message (it may quote the question, the conversation).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable

from klaw.engine.approval import without_answer_line
from klaw.engine.approval_outcome import callback_raised, no_callback
from klaw.engine.runtime import Engine
from klaw.store.records import ChatRef

log = logging.getLogger("klaw.library")

Approve = Callable[[ChatRef, str], Awaitable[bool]]  # (chat, the question as a person reads it) → run it?


async def answer_approval(
    engine: Engine | None, approve: Approve | None, chat: ChatRef, request_id: str, question: str
) -> None:
    """Put question `request_id` of `chat` to `approve` and give the engine its answer, or end the question
    unrun when there is no callback or it failed. `engine` None: closed meanwhile, nothing to answer."""
    if approve is None:
        if engine is not None:
            engine.approvals.no_approver(chat, request_id, no_callback)
        return
    fault = None
    try:
        approved = await approve(chat, without_answer_line(question))
    except Exception as exc:
        fault, where = f"raised {type(exc).__name__}", _raised_at(exc)
    else:
        if not isinstance(approved, bool):
            fault, where = f"returned {type(approved).__name__}, not True or False", ""
    if fault is not None:
        log.warning(
            "the approve callback %s%s for a question in %s:%s: the call was not run, and the model was told"
            " nobody approved it (approve= must return True or False)",
            fault,
            where,
            chat.channel,
            chat.chat_id,
        )
        if engine is not None:
            engine.approvals.no_approver(chat, request_id, lambda tool: callback_raised(tool, fault))
        return
    if engine is not None:
        await engine.commands.handle(chat, "approve" if approved else "deny", request_id)


def _raised_at(exc: BaseException) -> str:
    """` (at app.py:12, in approve)`: where the program's code raised, without the exception's message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}:{last.lineno}, in {last.name})"
