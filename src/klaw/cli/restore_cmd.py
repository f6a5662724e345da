"""`klaw restore ARCHIVE [--home DIR]`: a `klaw backup` archive made a working home (home_restore.py, decision 522).

A thin skin: the work is `klaw.home_restore.restore`; here the target is chosen (`--home`, else KLAW_HOME),
a bar shows the archive read twice (checked, then restored: on stderr, on a terminal), its refusals are one
line (exit 2), and the report says what the home holds and what to type next."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from klaw.cli.context import fail, home_from_env, stderr_console, stdout_console
from klaw.home import KlawHome
from klaw.like_ctrl_c import stopped_like_ctrl_c
from klaw.terminal_text import one_line

if TYPE_CHECKING:
    from klaw.home_restore import RestoreReport


def restore(
    archive: Annotated[Path, typer.Argument(help="The archive klaw backup wrote (a .tgz).")],
    home: Annotated[
        Path | None,
        typer.Option("--home", help="The folder to restore into (missing or empty); default: KLAW_HOME (~/.klaw)."),
    ] = None,
) -> None:
    """Make a home from a `klaw backup` archive: refused, with nothing written, over a home that holds anything
    or that klaw runs on, and for an archive that is not a klaw backup, leads out of the home, or is cut short;
    files 0600 and folders 0700; checked before it is given its name (klaw.db opens, the log reads, the tasks
    list); then what it holds and what to type next."""
    from klaw.home_restore import RestoreError
    from klaw.home_restore import restore as restore_home

    target = (home.expanduser().absolute() if home is not None else home_from_env(must_exist=False).root).resolve()
    archive = archive.expanduser().absolute()
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn())
    stopping = stopped_like_ctrl_c(signal.SIGTERM, signal.SIGHUP)  # as Ctrl-C: the hidden folder removed
    with stopping, Progress(*columns, console=stderr_console(), transient=True) as bar:
        task = bar.add_task("checking", total=None)

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)

        def notice(words: str) -> None:  # a crashed restore's hidden folder removed (decision 536)
            bar.console.print(_shown(words), highlight=False)

        try:
            report = restore_home(archive, target, progress=progress, notice=notice)
        except RestoreError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"cannot write {target}: {exc.strerror or exc}; nothing was restored", code=1)
    _said(report, home is not None)


def _said(report: RestoreReport, home_given: bool) -> None:
    out = stdout_console()
    facts, counts = report.facts, report.counts
    made = f", made {_shown(facts.made)} by klaw {_shown(facts.klaw)}" if facts.made else ""
    size = f"{facts.files} files and folders, {facts.bytes / 1e6:.1f} MB{made}"
    out.print(f"Restored {_shown(str(report.target))} ({size}; folders 0700, files 0600).")
    if counts.messages is not None:
        out.print(f"klaw.db opens: {counts.messages} messages in {counts.chats} chats.")
    out.print(
        f"Conversation log: {counts.log_records} records in {counts.log_chats} chats"
        + (f", {counts.malformed_lines} malformed lines (klaw log check names them)" if counts.malformed_lines else "")
        + f"; {counts.tasks} scheduled tasks; {counts.skills} skills."
    )
    prefix = _prefix(report.target, home_given)
    steps: list[str] = []
    if counts.config_error is not None:
        steps.append(
            f"engine.yaml does not load with this klaw, so klaw.db was not opened: {_shown(prefix)}klaw config check"
        )
    if counts.postgres:
        steps.append(
            f"its memory is in PostgreSQL (the variable {_shown(counts.url_env)}), not in the archive: restore the"
            " database's pg_dump first (docs/postgres.md, 'Restoring a backup')"
        )
    if counts.database_outside:
        steps.append(
            f"engine.yaml's database.path is {_shown(counts.database_path)}, outside the home; the archive's copy is"
            f" at {_shown(str(report.target / (facts.database or 'outside-home')))}: move it there, or set"
            " database.path to it"
        )
    if facts.sandbox_packages:
        names = " ".join(shlex.quote(name) for name in facts.sandbox_packages)
        steps.append(f"{_shown(prefix)}klaw sandbox install {_shown(names)}   (sandbox/ is not in a backup)")
    if facts.odd_packages:
        odd = ", ".join(repr(name) for name in facts.odd_packages[:5]) + (" …" if len(facts.odd_packages) > 5 else "")
        steps.append(
            f"klaw-backup.json also lists {len(facts.odd_packages)} that are not package names, left out of that"
            f" command: {_shown(odd)}"
        )
    if (
        not facts.sandbox_packages and facts.format == 0 and counts.sandbox_backend != "none"
    ):  # made before the archive named its packages
        steps.append(
            f"packages you had installed for code_execute are not in a backup: {_shown(prefix)}klaw sandbox install"
            " PKG…"
        )
    shown = _shown(prefix)
    steps.append(f"{shown}klaw serve   (or {shown}klaw chat; as a service: {shown}klaw service install)")
    out.print("Next:")
    for step in steps:
        out.print(f"  {step}")


def _shown(text: str) -> str:
    """`text` from the archive or its engine.yaml as printed: on one line, every control character shown, not
    obeyed (an ESC [2J in `klaw` cleared the screen; decision 531). stdout_console reads no markup."""
    return one_line(text)


def _prefix(target: Path, home_given: bool) -> str:
    """`KLAW_HOME=… ` when the restored home is not the one a bare `klaw` would use."""
    if home_given and target != KlawHome.from_env().root:
        return f"KLAW_HOME={shlex.quote(str(target))} "
    return ""
