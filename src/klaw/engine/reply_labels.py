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
