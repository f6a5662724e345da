"""The Telegram chats the stored scheduled tasks report to, checked by `klaw config check` in the words a
typed chat gets: a task saved before decision 501 refused `telegram:abc` (or by the agent's `schedule_add`)
still reports into a chat no Telegram message reaches, and one whose chat the bot does not serve (the bot
off, the chat not in allowedChatIds) reports to nobody; each run only logged it (lefts55, decision 510)."""

from __future__ import annotations

import sqlite3

from klaw.config import EngineConfig
from klaw.config.channels import telegram_id_refused
from klaw.home import KlawHome


def task_target_warnings(home: KlawHome, config: EngineConfig) -> list[str]:
    """One warning per stored task whose Telegram target is no chat's number, or one the bot does not serve;
    none when there is no scheduler.db or it cannot be read (`klaw schedule list` says why)."""
    from klaw.scheduling.task_store import SchedulerFileTooNew, ScheduleStore

    if not home.scheduler_db.exists():
        return []
    try:
        tasks = ScheduleStore(home.scheduler_db).list_read_only()
    except (sqlite3.Error, OSError, SchedulerFileTooNew):
        return []
    said = []
    for task in tasks:
        target = task.inject_into
        if target is None or target.channel != "telegram":
            continue
        if (refused := telegram_id_refused(target.chat_id)) is not None:
            said.append(
                f"warning: task {task.name} reports to {target}: {refused}; `klaw schedule remove {task.name}`,"
                " then add it again with the chat's number"
            )
        elif (why := config.channels.telegram.unserved(target.chat_id)) is not None:
            said.append(f"warning: task {task.name} runs, but its replies reach nobody: {why}")
    return said
