"""The line a channel heads a message with when it is not the answer to what its person just sent: a task's
answer, a message the agent wrote in another chat. Apart from frames.py (which re-exports them for the
channels) so that the protocol's models have their room; imports nothing of klaw.
"""

from __future__ import annotations


def task_label(task: str, spawned: bool) -> str:
    """How a channel heads a task's answer: a subagent's one-off run is no scheduled task (decision 249)."""
    return f"Subagent: {task}" if spawned else f"Scheduled task: {task}"


def unasked_label(task: str | None, spawned: bool, sent_from: str | None) -> str | None:
    """The line a channel heads a message the agent sent unasked with, so it is not read as an answer to
    the last message: a task's answer names its task, one written in another chat (`message_send`) that
    chat ("From web:main"); None for anything else."""
    if task is not None:
        return task_label(task, spawned)
    return None if sent_from is None else f"From {sent_from}"


def origin_label(origin: str | None) -> str:
    """How a terminal heads a reply to a message it did not send, by where that message came from
    (`OutboundFrame.origin`, engine/message_origins.py; decision 535): never as if it were its own."""
    if origin == "pipe-beside-terminal":
        return "Reply to a message piped in beside this terminal (`… | klaw chat`):"
    said = {
        "pipe": "piped in (`… | klaw chat`)",
        "terminal": "sent from an earlier `klaw chat` terminal",
        "restart": "sent before klaw last restarted (answered again)",
        "web": "sent from the web page",
        "telegram": "sent from Telegram",
        "socket": "sent by a program on the engine's socket",
    }
    if origin is None:
        return "Reply to a message this terminal did not send:"
    return f"Reply to a message {said.get(origin, f'sent from {origin}')}:"
