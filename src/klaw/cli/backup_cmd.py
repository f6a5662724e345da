"""`klaw backup [PATH]`: the home in one private archive while klaw may run on it (home_backup.py, decision 512).

A thin skin: the work is `klaw.home_backup.back_up`; here the home and its database are found, a bar shows
the bytes archived (on stderr, on a terminal), and the report says what was left out, how to restore
(`klaw restore`), and, on PostgreSQL, that the database needs pg_dump."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from klaw.cli.context import fail, home_from_env, load_or_exit, stderr_console, stdout_console
from klaw.like_ctrl_c import stopped_like_ctrl_c
from klaw.private_files import private_dirs
from klaw.terminal_text import one_line

RESTORE = (
    "Restore it: klaw restore {path} --home NEW_FOLDER (checked, then made a home; it never writes over a home"
    " in use: to put it back in place, stop klaw serve, or the service, and leave every klaw chat attached to it,"
    " then move the old home aside; docs/maintenance.md)."
)
PG_DUMP = (
    "This home's memory and conversation log are in PostgreSQL (database.backend: postgres): the archive holds"
    " none of them (nor any SQLite copy a 'klaw db migrate' left in the home)."
    ' Back the database up too: pg_dump -Fc -f klaw-$(date +%F).dump "${variable}"'
    " (docs/postgres.md, 'Restoring a backup')."
)


def backup(
    path: Annotated[
        str | None,
        typer.Argument(
            help="The archive to write (a .tgz), or a folder for klaw-DATE-TIME.tgz (ending in /: made 0700 if"
            " missing); default: here.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write the whole home into one gzip'd tar, readable by you alone (0600), while klaw may be running:
    klaw.db and scheduler.db copied as of one moment (SQLite's online backup), then the conversation log
    (whole lines only); cache/, sandbox/, logs/, docs_index.db and sockets left out. On PostgreSQL the
    database is not in it: back it up with pg_dump (the command is printed)."""
    from klaw.home_backup import BackupError, back_up

    home = home_from_env()
    database = load_or_exit(home).config.database
    sqlite_file = home.database_file(database.path) if database.backend == "sqlite" else None
    target = Path(path).expanduser() if path else Path.cwd()
    inside = target.resolve().is_relative_to(home.root.resolve())  # refused by back_up: nothing made there (528)
    if path and path.endswith(("/", os.sep)) and not target.exists() and not inside:
        # `klaw backup ~/backups/` names a folder (as the README writes it): without this a file `backups`
        # was written, and the next backup into it refused as "exists already"
        try:
            private_dirs(target)
        except OSError as exc:
            fail(f"cannot make the folder {target}: {exc.strerror or exc}; nothing was written")
    errors = stderr_console()
    columns = (TextColumn("archiving"), BarColumn(), DownloadColumn(), TimeElapsedColumn())
    # SIGTERM (systemd, timeout) and SIGHUP (a closed terminal) unwind as Ctrl-C does: the partial archive and
    # the database copies beside it are removed on the way out (decision 524)
    stopping = stopped_like_ctrl_c(signal.SIGTERM, signal.SIGHUP)
    with stopping, Progress(*columns, console=errors, transient=True) as bar:
        task = bar.add_task("archiving", total=None)
        try:
            report = back_up(
                home,
                target,
                database=sqlite_file,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                left_copy=home.database_file(database.path) if sqlite_file is None else None,
            )
        except BackupError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"cannot write {target}: {exc.strerror or exc}; nothing was written")
    out = stdout_console()
    out.print(f"Wrote {report.path} ({report.files} files, {report.bytes / 1e6:.1f} MB before compression; mode 0600).")
    if report.left_out:
        out.print("Left out: " + one_line(", ".join(report.left_out)) + ".")  # names shown, not obeyed
    out.print(RESTORE.format(path=report.path))
    if report.postgres:
        errors.print(PG_DUMP.format(variable=database.url_env or "KLAW_DATABASE_URL"))
