"""`scheduler.db`: the table of scheduled tasks, so they survive restarts.

A small SQLite file of its own (plain sqlite3: it needs no extension). Both the engine and
`klaw schedule` edit it; every call opens a short connection (WAL, busy timeout), so neither holds
a lock between calls. The methods are synchronous: the CLI calls them directly, the engine from a
worker thread. Times are UTC milliseconds.

A row that no longer validates (edited by hand) is skipped with a warning naming the task, never
a crash of the scheduler.
"""

from __future__ import annotations

import builtins
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from klaw.errors import KlawError
from klaw.private_files import create_private
from klaw.scheduling.names import parse_chat_target, validate_task_name
from klaw.scheduling.schedules import TaskSchedule
from klaw.store.records import ChatRef, from_millis, to_millis

log = logging.getLogger(__name__)

SCHEMA_VERSION = 5
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('cron', 'every', 'at')),
    expression TEXT NOT NULL,
    message TEXT NOT NULL,
    model TEXT,
    inject_into TEXT,
    created_at INTEGER NOT NULL,
    next_run_at INTEGER,
    last_run_at INTEGER,
    last_status TEXT,
    allowed_tools TEXT NOT NULL DEFAULT ''
);
"""
# Version 2: `allowed_tools`, the held tools (tools.approval) a run may use without asking, space-separated.
_MIGRATE_TO_2 = "ALTER TABLE tasks ADD COLUMN allowed_tools TEXT NOT NULL DEFAULT ''"
# Version 3: the runs under way, scheduled or spawned (`log_name`: the task's name or `spawn:<name>`), a row
# from a run's start to its end: one left at a start is a run a crash cut off (decision 307).
# Version 4: a row stays until the run's answer is in its chat (`answer_id`, `answer`, `answered_at` once the
# run ended with one), so two runs of a name may be noted at once: keyed by name and start (decision 432).
_RUNS = """
CREATE TABLE IF NOT EXISTS runs (
    log_name TEXT NOT NULL,
    task TEXT NOT NULL,
    origin TEXT NOT NULL,
    inject_into TEXT,
    started_at INTEGER NOT NULL,
    answer_id TEXT,
    answer TEXT,
    answered_at INTEGER,
    PRIMARY KEY (log_name, started_at)
);
"""
_MIGRATE_TO_4 = (
    "ALTER TABLE runs RENAME TO runs_3",
    _RUNS,
    "INSERT INTO runs (log_name, task, origin, inject_into, started_at)"
    " SELECT log_name, task, origin, inject_into, started_at FROM runs_3",
    "DROP TABLE runs_3",
)
# What the last run of a task met that its status does not say (its replies reach nobody, its model refused,
# it could not start), in words, for `klaw schedule list` and `runs`; a table of its own, made when missing,
# so the schema's version (and an older klaw reading the file) is untouched (decision 510).
_NOTES = "CREATE TABLE IF NOT EXISTS task_notes (name TEXT PRIMARY KEY, at INTEGER NOT NULL, note TEXT NOT NULL)"
# Version 5: `at`, a one-off task (its time in epoch seconds): the kind's CHECK is the table's, so the table is
# made again with it and the rows copied (decision 526).
_MIGRATE_TO_5 = (
    "ALTER TABLE tasks RENAME TO tasks_4",
    _SCHEMA,
    "INSERT INTO tasks SELECT * FROM tasks_4",
    "DROP TABLE tasks_4",
)
_RUN_COLUMNS = "log_name, task, origin, inject_into, started_at, answer_id, answer, answered_at"
_COLUMNS = (
    "name, kind, expression, message, model, inject_into, created_at, next_run_at, last_run_at, last_status,"
    " allowed_tools"
)


class DuplicateTask(KlawError, ValueError):
    """A task of that name exists already."""


class SchedulerFileTooNew(KlawError, RuntimeError):
    """scheduler.db was made by a newer klaw: this one neither reads nor changes it (decision 542)."""

    def __init__(self, path: Path, version: int) -> None:
        super().__init__(
            f"{path} was made by a newer klaw (schema version {version}; this klaw knows up to {SCHEMA_VERSION}),"
            " so this klaw leaves it untouched: use the klaw that made it, or upgrade this one (docs/maintenance.md)"
        )


@dataclass(frozen=True)
class ScheduledTask:
    name: str
    schedule: TaskSchedule
    message: str
    model: str | None
    inject_into: ChatRef | None
    created_at: datetime
    next_run_at: datetime | None = None  # None: the engine computes it at its next look
    last_run_at: datetime | None = None
    last_status: str | None = None
    # Tools held for approval (tools.approval) that this task's runs may use: nobody is there to ask.
    allowed_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        validate_task_name(self.name)
        if not self.message.strip():
            raise ValueError("a task needs a message: the request its runs start from")


@dataclass(frozen=True)
class NotedAnswer:
    """A run's answer waiting for its chat: the id its chat message gets (decision 324), its text, and
    when the run's final record was written (the chat is asked for the id from then on)."""

    id: str
    text: str
    at: datetime


@dataclass(frozen=True)
class RunUnderWay:
    """A task's run from its start until its answer is in its chat (`runs`): `log_name` as `run_log_name`
    gives it. `answer`, once the run ended with one its chat has not got yet (decision 432)."""

    log_name: str
    task: str
    origin: str  # schedule | spawn
    inject_into: ChatRef | None
    started_at: datetime
    answer: NotedAnswer | None = None


class ScheduleStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def create(self) -> None:
        """Create the file and table if missing (idempotent)."""
        with self._connect() as connection:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            existed = connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'tasks'").fetchone() is not None
            if existed and version < 2:
                connection.execute(_MIGRATE_TO_2)
            for statement in _MIGRATE_TO_5 if existed and version < 5 else (_SCHEMA,):
                connection.execute(statement)
            had_runs = connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone() is not None
            for statement in _MIGRATE_TO_4 if had_runs and version < 4 else (_RUNS,):
                connection.execute(statement)
            connection.execute(_NOTES)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def version(self) -> int:
        """The file's schema version, read without writing (0: no file, or none made by klaw yet)."""
        if not self.path.exists():
            return 0
        with closing(sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True, timeout=10)) as db:
            return int(db.execute("PRAGMA user_version").fetchone()[0])

    def add(self, task: ScheduledTask) -> None:
        with self._connect() as connection:
            try:
                connection.execute(
                    f"INSERT INTO tasks ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _row(task)
                )
            except sqlite3.IntegrityError:
                raise DuplicateTask(
                    f"a task named {task.name!r} already exists; remove it first or choose another name"
                ) from None

    def remove(self, name: str) -> bool:
        with self._connect() as connection:
            connection.execute(_NOTES)  # a file `create` has not brought up to date yet
            connection.execute("DELETE FROM task_notes WHERE name = ?", (name,))  # its last run's words go with it
            return connection.execute("DELETE FROM tasks WHERE name = ?", (name,)).rowcount > 0

    def get(self, name: str) -> ScheduledTask | None:
        with self._connect() as connection:
            row = connection.execute(f"SELECT {_COLUMNS} FROM tasks WHERE name = ?", (name,)).fetchone()
        return None if row is None else _task(row)

    def list(self) -> list[ScheduledTask]:
        """Every valid task, by name."""
        with self._connect() as connection:
            rows = connection.execute(f"SELECT {_COLUMNS} FROM tasks ORDER BY name").fetchall()
        return [task for task in (_task(row) for row in rows) if task is not None]

    def list_read_only(self) -> builtins.list[ScheduledTask]:
        """`list` without writing: for a home klaw cannot write (a read-only mount, a folder not the
        user's), where `klaw memory list` reads klaw.db too. SQLite reads a WAL database read-only only
        where its -shm file exists or can be made; without a -wal file (a clean close) every task is in
        the file itself, which is then read as immutable: nothing can change it on a read-only mount."""
        base = self.path.absolute().as_uri()
        try:
            rows = _read_tasks(self.path, f"{base}?mode=ro")
        except sqlite3.OperationalError:
            try:  # a full disk: no byte for the -shm file SQLite sizes by writing (decision 431)
                rows = _read_tasks(self.path, base, index_in_memory=True)
            except sqlite3.OperationalError:
                if Path(f"{self.path}-wal").exists():
                    raise
                rows = _read_tasks(self.path, f"{base}?immutable=1")
        return [task for task in (_task(row) for row in rows) if task is not None]

    def set_next_run(self, name: str, next_run_at: datetime | None) -> None:
        with self._connect() as connection:
            connection.execute("UPDATE tasks SET next_run_at = ? WHERE name = ?", (_millis(next_run_at), name))

    def record_run(self, name: str, at: datetime, status: str, note: str | None = None) -> None:
        """The task's last run: when, its status, and what it met in words (`note`; None clears an older one)."""
        with self._connect() as connection:
            connection.execute(
                "UPDATE tasks SET last_run_at = ?, last_status = ? WHERE name = ?", (to_millis(at), status, name)
            )
            connection.execute(_NOTES)  # a file `create` has not brought up to date yet
            if note is None:
                connection.execute("DELETE FROM task_notes WHERE name = ?", (name,))
            else:
                connection.execute(
                    "INSERT OR REPLACE INTO task_notes (name, at, note) VALUES (?, ?, ?)", (name, to_millis(at), note)
                )

    def last_notes(self) -> dict[str, str]:
        """Each task's last run's note (`record_run`), read without writing; none when the file has no such
        table (an older klaw's) or cannot be read (`list` says why). Only a task there now, whose last run is
        the one its note was kept with: a task removed, or added again under its name, said its old run's
        trouble to `klaw status` (review55)."""
        try:
            with closing(sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True, timeout=10)) as db:
                rows = db.execute(
                    "SELECT n.name, n.note FROM task_notes AS n JOIN tasks AS t ON t.name = n.name"
                    " AND t.last_run_at = n.at"
                ).fetchall()
        except sqlite3.Error:
            return {}
        return {str(name): str(note) for name, note in rows}

    def run_started(self, run: RunUnderWay) -> None:
        """Note a run under way until `run_ended` (a run of the same name whose answer waits keeps its own)."""
        target = str(run.inject_into) if run.inject_into else None
        with self._connect() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO runs (log_name, task, origin, inject_into, started_at) VALUES (?, ?, ?, ?, ?)",
                (run.log_name, run.task, run.origin, target, to_millis(run.started_at)),
            )

    def answer_waits(self, run: RunUnderWay, answer: NotedAnswer) -> None:
        """The run ended with `answer`, which its chat has not got yet: kept with its note until `run_ended`,
        so a crash before it is in the chat has it sent there at the next start (decision 432)."""
        with self._connect() as connection:
            connection.execute(
                "UPDATE runs SET answer_id = ?, answer = ?, answered_at = ? WHERE log_name = ? AND started_at = ?",
                (answer.id, answer.text, to_millis(answer.at), run.log_name, to_millis(run.started_at)),
            )

    def run_ended(self, run: RunUnderWay) -> None:
        """The run's answer is in its chat, or it had none to give (or its cut-off was told): its row goes,
        not a later run's of the same name."""
        with self._connect() as connection:
            connection.execute(
                "DELETE FROM runs WHERE log_name = ? AND started_at = ?", (run.log_name, to_millis(run.started_at))
            )

    def runs_under_way(self) -> tuple[RunUnderWay, ...]:
        """The runs noted and not ended: at a start, those a crash cut off or kept from their chat, in the
        order they ended (a cut-off one at its start), as their chats get them. A row that cannot
        be read (edited by hand, a damaged file) is reported, removed and left out: it must not stop a start."""
        runs: list[RunUnderWay] = []
        with self._connect() as connection:
            rows = connection.execute(
                f"SELECT rowid, {_RUN_COLUMNS} FROM runs ORDER BY COALESCE(answered_at, started_at), rowid"
            ).fetchall()
            for rowid, *row in rows:
                try:
                    runs.append(_run(tuple(row)))
                except (TypeError, ValueError, OverflowError):
                    log.warning("scheduler.db: a run of task %r noted under way cannot be read; removed", row[1])
                    connection.execute("DELETE FROM runs WHERE rowid = ?", (rowid,))
        return tuple(runs)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        create_private(self.path)  # 0600 before sqlite3 creates it 0644 & ~umask; its -wal/-shm follow its mode
        with closing(sqlite3.connect(self.path, timeout=10, isolation_level=None)) as connection:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("BEGIN IMMEDIATE")
            try:
                if (version := connection.execute("PRAGMA user_version").fetchone()[0]) > SCHEMA_VERSION:
                    raise SchedulerFileTooNew(self.path, version)  # before any read or write (decision 542)
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")


def _read_tasks(path: Path, uri: str, *, index_in_memory: bool = False) -> list[tuple[object, ...]]:
    """`index_in_memory`: in exclusive locking mode, set before the file is read, SQLite keeps WAL's index
    in memory instead of a -shm file, and `query_only` keeps the connection to reading (a file system
    with no space left, whose files can still be opened for writing; not a read-only mount)."""
    with closing(sqlite3.connect(uri, uri=True, timeout=10)) as connection:
        if index_in_memory:
            connection.execute("PRAGMA locking_mode = EXCLUSIVE")
            connection.execute("PRAGMA query_only = ON")
        if (version := connection.execute("PRAGMA user_version").fetchone()[0]) > SCHEMA_VERSION:
            raise SchedulerFileTooNew(path, version)
        return connection.execute(f"SELECT {_COLUMNS} FROM tasks ORDER BY name").fetchall()


def _run(row: tuple[object, ...]) -> RunUnderWay:
    log_name, task, origin, target, started, answer_id, answer, answered = row
    try:
        chat = parse_chat_target(str(target)) if target else None
    except ValueError:
        chat = None  # edited by hand: the run is still told in its log and `klaw schedule list`
    noted = None
    if answer_id is not None and answer is not None and answered is not None:
        noted = NotedAnswer(str(answer_id), str(answer), from_millis(int(str(answered))))
    return RunUnderWay(str(log_name), str(task), str(origin), chat, from_millis(int(str(started))), noted)


def _millis(moment: datetime | None) -> int | None:
    return None if moment is None else to_millis(moment)


def _row(task: ScheduledTask) -> tuple[object, ...]:
    return (
        task.name,
        task.schedule.kind,
        task.schedule.expression,
        task.message,
        task.model,
        str(task.inject_into) if task.inject_into else None,
        to_millis(task.created_at),
        _millis(task.next_run_at),
        _millis(task.last_run_at),
        task.last_status,
        " ".join(task.allowed_tools),
    )


def _task(row: tuple[object, ...]) -> ScheduledTask | None:
    name, kind, expression, message, model, inject_into, created, next_run, last_run, status, allowed = row
    try:
        task = ScheduledTask(
            name=str(name),
            schedule=TaskSchedule.stored(str(kind), str(expression)),
            message=str(message),
            model=str(model) if model else None,
            inject_into=parse_chat_target(str(inject_into)) if inject_into else None,
            created_at=from_millis(int(str(created))),
        )
    except ValueError as exc:
        log.warning("scheduler.db: skipping task %r, which does not validate: %s", name, exc)
        return None
    return replace(
        task,
        next_run_at=None if next_run is None else from_millis(int(str(next_run))),
        last_run_at=None if last_run is None else from_millis(int(str(last_run))),
        last_status=None if status is None else str(status),
        allowed_tools=tuple(str(allowed or "").split()),
    )
