"""`POST /api/messages?wait=N` with `/approve ID` or `/deny ID`: the wait covers what the answer unblocks
(decision 525, item 4).

newcomer23: `{"text": "/approve 403f"}` with `wait=30` returned the notice "Approved: code_execute runs now."
alone, and the tool's result and the agent's reply had to be polled from `/api/history`. The wait is for the
answer to what was sent (decision 360); the answer to an approval is the turn it lets go on. So `reply` stays the
command's own notice, as for every message, and `unblocked` is that turn's reply (or error), waited for within
the same N seconds; for a subagent's question, its run's answer. A new question asked meanwhile ends the wait as
it ends a message's, with `approvals` and `note` (api.py). A question asked in another chat (the owner's console,
answered from the page: approval_elsewhere.py) has its reply there, so nothing more is waited for here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from klaw.channels.web.events import Subscription
from klaw.command_syntax import parse_command

ANSWERED = ("Approved", "Denied")  # how the engine's notice begins when the answer was taken (approval.py)


async def answered_question(text: str, waiting: Callable[[], Awaitable[list[dict[str, Any]]]]) -> dict[str, Any] | None:
    """The question of the page's chat that `text` (`/approve ID`, `/deny ID`, or bare with one waiting)
    answers, from `waiting` (the `approvals` query, asked before it is sent, and only for those commands);
    None for anything else."""
    command = parse_command(text)
    if command is None or command.name not in ("approve", "deny"):
        return None
    words = command.args.split()
    if len(words) > 1:
        return None
    questions = await waiting()
    if not words:
        return questions[0] if len(questions) == 1 else None
    return next((q for q in questions if str(q.get("id")) == words[0].lower()), None)


def took_the_answer(reply: dict[str, Any] | None) -> bool:
    """Whether the command's notice says the answer was taken (not "No approval request … is waiting")."""
    return reply is not None and reply.get("kind") == "notice" and str(reply.get("text", "")).startswith(ANSWERED)


async def unblocked_reply(
    answers: Subscription, chat_id: str, question: dict[str, Any], seconds: float
) -> dict[str, Any] | None:
    """The reply (or error) of the turn `question` held, or its subagent run's answer, within `seconds`;
    None when none came, or when another approval question came first (what holds the chat up then)."""
    task = question.get("task")
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, seconds)):
            while (event := await answers.next()) is not None:
                data = event.data
                if data.get("chat_id") != chat_id:
                    continue
                if data.get("approval"):
                    return None
                if task is not None:
                    found = event.kind in ("reply", "notice", "error") and data.get("task") == task
                else:  # the chat's turn answers its person's message; not a task's answer, not another chat's
                    found = event.kind in ("reply", "error") and data.get("reply_to") is not None
                    found = found and not data.get("task") and not data.get("sent_from")
                if found:
                    return {"kind": event.kind, **{k: v for k, v in data.items() if k != "reply_to"}}
    return None
