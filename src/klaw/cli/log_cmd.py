"""`klaw log check`: read every conversation log and report what cannot be used; `klaw log export`: the
log a PostgreSQL home keeps in its database written out as JSONL files."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from klaw.cli.context import fail, home_from_env, load_or_exit, stdout_console
from klaw.cli.reindex_cmd import stage_bars
from klaw.home import KlawHome
from klaw.log_format import held_back

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.config import DatabaseConfig
    from klaw.memory.conversation_log import ConversationLog
    from klaw.memory.kept_log_files import KeptLogReport
    from klaw.store.rebuild_protocol import KeptLog

app = typer.Typer(
    rich_markup_mode="markdown", help="Inspect the conversation log (the source of truth).", no_args_is_help=True
)


@app.command()
def check() -> None:
    """Count the records per chat and list malformed lines (file:line and reason, never content). On
    PostgreSQL the log is the database's log_records: malformed rows are named by day, line and seq, and
    records no klaw writes (a message over the cap, a date ahead, an id twice) by id, as in the files;
    scheduled tasks' run logs stay JSONL files and are checked as such, and chats' JSONL files left from
    before the move are named in one line, not checked (they are not the log). An unfinished build an
    interrupted `klaw reindex` left (files beside klaw.db, or PostgreSQL's schema klaw_reindex) is named
    with what to type, and so is a forget stopped before it took its text out of the log, or before its
    tombstone reached the database (a full disk: exit 1 for either), or one stopped only before clearing its
    note (exit 0), or, when the database cannot be opened to know that, that it was not checked (exit 1)."""
    # The reader warns of each line it skips; here the report below lists them once, so not twice. Set back
    # after: a test's CliRunner runs it in a process whose later tests read those warnings.
    with held_back("klaw.memory.conversation_log"):
        _check()


def _check() -> None:
    from klaw.cli.memory_forget_cmd import noted_words, pending_forgets
    from klaw.memory.conversation_log import ConversationLog
    from klaw.memory.forget_notes import unfinished
    from klaw.memory.kept_log_files import check_kept_log
    from klaw.memory.reindex_leftover import leftover_reindex_notes
    from klaw.store.protocol import StorageError

    home = home_from_env()
    console = stdout_console()
    database = load_or_exit(home).config.database
    files = ConversationLog(home.conversations)
    kept = _kept_log_or_none(home, database)
    if kept is None:
        bad = _check_files(console, files, [*files.chat_dirs(), *files.task_dirs()])
    else:
        bad = _check_files(console, files, files.task_dirs())  # run logs are files on every backend
        report = _with_bars(console, database, "reading log_records", lambda progress: check_kept_log(kept, progress))
        _print_kept(console, report)
        bad += len(report.malformed) + sum(len(report.odd(chat)) for chat in report.records)
        _name_left_over(console, home, files.chat_dirs())
    for note in leftover_reindex_notes(home.database_file(database.path), database):
        console.print(note, soft_wrap=True)  # not the log's damage: no exit status of its own
    unread: str | None = None
    try:
        pending = pending_forgets(home, database)  # text a person erased, still in the log (decision 454)
    except StorageError as exc:  # not checked: said, and the exit status does not claim all is well (460)
        pending, unread = [], str(exc)
    for words in noted_words(pending):
        console.print(words, soft_wrap=True, highlight=False, markup=False, emoji=False)
    if unread is not None:
        console.print(
            "Not checked: whether an interrupted forget left text a person erased in the log. That is read from"
            f" the database, which cannot be opened now: {unread}",
            soft_wrap=True,
            highlight=False,
            markup=False,
            emoji=False,
        )
    if bad:
        console.print(
            "Readers skip these lines and nothing else is affected. To repair one (or to see how such a line"
            " comes about): docs/maintenance.md, 'Malformed log lines'."
        )
        raise typer.Exit(1)
    if unfinished(pending) or unread is not None:
        raise typer.Exit(1)


@app.command()
def export(
    to: Annotated[Path, typer.Option("--to", help="A new (or empty) directory to write the JSONL files into.")],
) -> None:
    """Write the log a PostgreSQL home keeps (log_records) as JSONL files, one per chat and UTC day, in the
    layout of KLAW_HOME/conversations: for backups, grep, or `klaw reindex` of an SQLite home."""
    from klaw.memory.kept_log_files import ExportTargetError, export_kept_log, refuse_target

    home = home_from_env()
    database = load_or_exit(home).config.database
    kept = _kept_log_or_none(home, database)
    if kept is None:
        fail(
            f"this home's log is its JSONL files already ({home.conversations}): copy them; export is for a"
            " PostgreSQL home, whose log is in its database"
        )
    try:
        refuse_target(to)  # before the bar: a refusal under `exporting days 0/?` looked half-started
    except ExportTargetError as exc:
        fail(str(exc))
    console = stdout_console()
    try:
        report = _with_bars(console, database, "exporting days", lambda progress: export_kept_log(kept, to, progress))
    except ExportTargetError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the export into {to}: {exc.strerror or exc}")
    records = sum(report.records.values())
    chats, files = len(report.records), report.files
    console.print(
        f"exported {records} record{'s' * (records != 1)} of {chats} chat{'s' * (chats != 1)} into {to}"
        f" ({files} file{'s' * (files != 1)})"
    )
    if report.malformed:
        console.print(
            f"{len(report.malformed)} malformed row(s) written out as they are (reading skips them);"
            " 'klaw log check' names them"
        )


def _check_files(console: Console, log: ConversationLog, dirs: list[Path]) -> int:
    from datetime import UTC, datetime

    from klaw.memory.log_oddities import oddities

    bad = 0
    for chat_dir in dirs:
        report = asyncio.run(log.read(log.files(chat_dir)))
        odd = oddities(report.records, datetime.now(UTC))  # parsed, but no klaw wrote them (decision 488)
        console.print(
            f"{chat_dir.name}: {len(report.records)} records, {len(report.skipped)} malformed lines"
            + (f", {len(odd)} odd record(s)" if odd else "")
        )
        for path, number, reason in report.skipped:
            console.print(f"  {path}:{number}: {reason}")
        for sentence in odd:
            console.print(f"  {sentence}")
        bad += len(report.skipped) + len(odd)
    return bad


def _name_left_over(console: Console, home: KlawHome, chat_dirs: list[Path]) -> None:
    """Chats' JSONL files in a PostgreSQL home: left by `klaw db migrate` (it leaves the SQLite home as
    it was), never written or read since; said so a person does not take them for the log."""
    if chat_dirs:
        console.print(
            f"{home.conversations}: JSONL files of {len(chat_dirs)} chat(s) from before this home moved to"
            " PostgreSQL: not its log (log_records is) and not checked; keep them as a backup or delete them",
            soft_wrap=True,
        )


def _kept_log_or_none(home: KlawHome, database: DatabaseConfig) -> KeptLog | None:
    from klaw.store.backend import kept_log
    from klaw.store.protocol import StorageError

    try:
        return kept_log(home.database_file(database.path), database)
    except StorageError as exc:
        fail(str(exc))


def _with_bars(
    console: Console,
    database: DatabaseConfig,
    label: str,
    work: Callable[[Callable[[int, int], None]], KeptLogReport],
) -> KeptLogReport:
    """`work` with a bar over the log's days; a server that cannot be reached, or fails part-way, is one
    line naming the variable that holds its connection string (its value masked), exit 2."""
    from klaw.store.backend import storage_failure
    from klaw.store.protocol import StorageError

    bars = stage_bars(console)
    task = bars.add_task(label, total=None)
    try:
        with bars:
            return work(lambda done, total: bars.update(task, completed=done, total=total))
    except StorageError as exc:
        fail(str(exc))
    except Exception as exc:  # the server's own error part-way (a table missing, the connection cut)
        failure = storage_failure(Path(), database, exc)  # no SQLite file here: only PostgreSQL reads
        if failure is None:
            raise
        fail(str(failure))


def _print_kept(console: Console, report: KeptLogReport) -> None:
    for chat, records in sorted(report.records.items(), key=lambda item: item[0].log_dir_name):
        odd = report.odd(chat)  # parsed, but no klaw wrote them (decisions 488, 500)
        console.print(
            f"{chat.log_dir_name} (log_records): {records} records" + (f", {len(odd)} odd record(s)" if odd else "")
        )
        for sentence in odd:
            console.print(f"  {sentence}")
    console.print(f"log_records: {sum(report.records.values())} records, {len(report.malformed)} malformed row(s)")
    for row in report.malformed:
        console.print(f"  {row.where()}: {row.reason}", soft_wrap=True)
