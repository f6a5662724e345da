"""The past of a scheduled task: its last N completed runs, read from its JSONL log
(docs/decisions/003-subagent-runs.md).

A subagent's history is not a sliding window and never comes from the database: it is the log
under `conversations/scheduler_<task>/`, which holds nothing but that task's runs.

* A **run** is a contiguous block of records; it ends with the run's final answer, an assistant
  record whose type is not `tool_call`. The next run starts right after it.
* A run is **complete** when it has that final answer. A block at the end without one (a run in
  progress, or one cut off by a crash) is skipped.
* Files are read in name order (names are dates, so that is chronological) and records within a
  file in line order; runs may span files. The last `n` complete runs are returned, oldest first,
  each run's records in their original order (tool calls and results included).
* A scheduled task's history leaves out the runs `subagent_spawn` started that older versions logged
  there (their request's `origin` is "spawn"; decision 217): a chat chose their text.
* A missing directory is a task's first run: empty, no warning. An empty file contributes nothing.
  A malformed line is skipped with a warning naming the file and line, never the content, and the
  rest of the file is read.

Files are read newest first, and only as far back as needed to bound the last `n` runs, so a
daily task with years of logs costs a few files per run, not all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from klaw.memory.conversation_log import ConversationLog, ReadReport, iter_file
from klaw.scheduling.names import SPAWNED_PREFIX, task_chat
from klaw.store.records import MessageRecord, RecordKind

Run = list[MessageRecord]


def ends_run(record: MessageRecord) -> bool:
    """The final answer of a run: an assistant record that is not a request for tool calls."""
    return record.kind is RecordKind.REPLY


def split_runs(records: Sequence[MessageRecord]) -> tuple[list[Run], Run]:
    """Complete runs in order, and the trailing records that do not (yet) form one."""
    runs: list[Run] = []
    current: Run = []
    for record in records:
        if record.is_control:
            continue  # state changes of chats; never part of what a model is shown
        current.append(record)
        if ends_run(record):
            runs.append(current)
            current = []
    return runs, current


class SubagentHistoryLoader:
    def __init__(self, conversations_dir: Path) -> None:
        self._log = ConversationLog(conversations_dir)

    def task_dir(self, task_name: str) -> Path:
        return self._log.chat_dir(task_chat(task_name))

    async def load_history(self, task_name: str, n: int) -> list[MessageRecord]:
        """The records of the last `n` complete runs of the task, oldest run first."""
        return [record for run in await self.load_runs(task_name, n) for record in run]

    async def load_runs(self, task_name: str, n: int) -> list[Run]:
        """The last `n` complete runs of the task, oldest first."""
        if n <= 0:
            return []
        runs, _ = await asyncio.to_thread(self._read_tail, task_name, n)
        if not task_name.startswith(SPAWNED_PREFIX):
            # A run `subagent_spawn` started was logged here before decision 217 gave spawned runs their
            # own log: text a chat chose, which a scheduled run holding allowed tools must never read.
            runs = [run for run in runs if (run[0].metadata or {}).get("origin") != "spawn"]
        return runs[-n:]

    async def finished_since(self, task_name: str, since: datetime) -> MessageRecord | None:
        """The final record of the task's run that started at `since` (the first logged from then on) if it
        ended, and not as cut off (a run klaw stopped after its answer and before its end was noted:
        decisions 307, 324). The first, not the last: a later run of the name may have run since (432)."""
        records = await asyncio.to_thread(self._read_back_to, task_name, since)
        runs, _ = split_runs(records)
        final = next((run[-1] for run in runs if run[0].created_at >= since), None)
        if final is None or (final.metadata or {}).get("run_status") == "interrupted":
            return None
        return final

    async def has_unfinished_run(self, task_name: str) -> bool:
        """Whether the log ends with records after the last final answer (a crash mid-run)."""
        return bool(await self.unfinished(task_name))

    async def unfinished(self, task_name: str) -> list[MessageRecord]:
        """The records after the log's last final answer: a run a crash cut off (its calls, decision 535)."""
        _, tail = await asyncio.to_thread(self._read_tail, task_name, 0)
        return list(tail)

    def _read_back_to(self, task_name: str, since: datetime) -> list[MessageRecord]:
        """Read files newest first until one begins before `since` (or none are left)."""
        records: list[MessageRecord] = []
        report = ReadReport()
        for path in reversed(ConversationLog.files(self.task_dir(task_name))):
            chunk = list(iter_file(path, report))
            records[:0] = chunk
            if chunk and chunk[0].created_at < since:
                break
        return records

    def _read_tail(self, task_name: str, n: int) -> tuple[list[Run], Run]:
        """Read files newest first until n + 1 final answers bound the last n runs (or none are left)."""
        files = ConversationLog.files(self.task_dir(task_name))
        report = ReadReport()
        records: list[MessageRecord] = []
        finals = 0
        for path in reversed(files):
            chunk = list(iter_file(path, report))
            records[:0] = chunk
            finals += sum(1 for record in chunk if ends_run(record))
            if finals > n:
                break
        return split_runs(records)
