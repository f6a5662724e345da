"""`klaw log check`: read every conversation log and report lines that cannot be used."""

from __future__ import annotations

import asyncio

import typer
from rich.console import Console

from klaw.cli.context import home_from_env
from klaw.memory.conversation_log import ConversationLog

app = typer.Typer(help="Inspect the conversation log (the source of truth).", no_args_is_help=True)


@app.command()
def check() -> None:
    """Count the records per chat and list malformed lines (file:line and reason, never content)."""
    log = ConversationLog(home_from_env().conversations)
    console = Console(markup=False)
    bad = 0
    for chat_dir in [*log.chat_dirs(), *log.task_dirs()]:
        report = asyncio.run(log.read(log.files(chat_dir)))
        console.print(f"{chat_dir.name}: {len(report.records)} records, {len(report.skipped)} malformed lines")
        for path, number, reason in report.skipped:
            console.print(f"  {path}:{number}: {reason}")
        bad += len(report.skipped)
    if bad:
        raise typer.Exit(1)
