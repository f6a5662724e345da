"""Task names and where a task's runs are logged: `conversations/scheduler_<task>/<date>.jsonl`.

A task name becomes a directory name, so it is validated strictly: lowercase letters, digits, '-'
and '_', starting with a letter or digit — no separators, no dots, no path traversal, and no two
names that a case-insensitive file system would merge. The `scheduler` channel is reserved for
these logs: a person's chat on a channel of that name would share their directories.

A run started by `subagent_spawn` is logged under `spawn:<task>` (`scheduler_spawn%3A<task>/`), never
under a scheduled task's own name (docs/decisions/217-spawned-runs-keep-their-own-history.md): its
request is text a chat chose, and a scheduled task's runs, which may hold pre-approved tools, read
their own log as their history.
"""

from __future__ import annotations

import re

from klaw.config.channels import telegram_id_refused
from klaw.errors import KlawError
from klaw.store.records import ChatRef

SUBAGENT_CHANNEL = "scheduler"
ADD_TOOL = "schedule_add"
SPAWN_TOOL = "subagent_spawn"
"""The tool that creates a task (scheduling/tools.py registers it so): `/forget` names the tasks the
forgotten exchange's calls of it created, which forgetting leaves scheduled (decision 280)."""
TASK_LOG_DIR_PREFIX = f"{SUBAGENT_CHANNEL}_"
SPAWNED_PREFIX = "spawn:"
MAX_TASK_NAME = 64
_TASK_NAME = re.compile(rf"[a-z0-9][a-z0-9_-]{{0,{MAX_TASK_NAME - 1}}}")


class InvalidTaskName(KlawError, ValueError):
    """A task name that cannot be a directory name; the message says what is allowed."""


def validate_task_name(name: str) -> str:
    """`name` unchanged if it is a valid task name, else `InvalidTaskName`."""
    if not _TASK_NAME.fullmatch(name):  # fullmatch: `$` would let a trailing newline through
        shown = name if len(name) <= MAX_TASK_NAME else name[:MAX_TASK_NAME] + "…"
        raise InvalidTaskName(
            f"invalid task name {shown!r}: use 1-{MAX_TASK_NAME} lowercase letters, digits, '-' or '_',"
            " starting with a letter or digit (it becomes a directory name)"
        )
    return name


def run_log_name(task_name: str, *, spawned: bool) -> str:
    """The name a run is logged (and kept from running twice) under: the task's own name for a scheduled
    run, `spawn:<name>` for one `subagent_spawn` started, so a chat never writes a scheduled task's history."""
    validate_task_name(task_name)
    return f"{SPAWNED_PREFIX}{task_name}" if spawned else task_name


def task_chat(name: str) -> ChatRef:
    """The chat a task's runs are logged under (`name` as `run_log_name` gives it); its `log_dir_name` is
    `scheduler_<name>`."""
    validate_task_name(name.removeprefix(SPAWNED_PREFIX))
    return ChatRef(SUBAGENT_CHANNEL, name)


def is_task_log_dir(dir_name: str) -> bool:
    """Whether a directory under conversations/ holds a task's runs rather than a chat."""
    return dir_name.startswith(TASK_LOG_DIR_PREFIX)


def parse_chat_target(text: str) -> ChatRef:
    """`channel:chat_id` → the chat a task's replies are injected into."""
    channel, sep, chat_id = text.strip().partition(":")
    if not sep or not chat_id:
        raise ValueError(f"invalid chat {text!r}: write it as channel:chat_id, e.g. console:alice")
    if channel == SUBAGENT_CHANNEL:
        raise ValueError(f"the {SUBAGENT_CHANNEL!r} channel holds task logs; a task cannot reply into it")
    return ChatRef(channel, chat_id)


TELEGRAM = "telegram"  # the Telegram channel's name (klaw/channels/telegram.py), whose chat ids are numbers


def typed_chat_target(text: str) -> ChatRef:
    """A chat a person or a program types (`Klaw.ask`, `klaw schedule add --inject-into`), read as
    `parse_chat_target` reads it; a Telegram chat's id must be its number too (a person's, or a group's negative
    one): `telegram:abc` was accepted and made a chat no Telegram message ever reaches (newcomer21, decision
    501). Stored targets are read with `parse_chat_target`, so a task saved before is still listed."""
    chat = parse_chat_target(text)
    if chat.channel == TELEGRAM and (refused := telegram_id_refused(chat.chat_id)) is not None:
        raise ValueError(refused)
    return chat
