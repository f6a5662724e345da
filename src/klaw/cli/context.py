"""What every command needs: the home directory, the loaded config, and friendly failures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console

from klaw.config_loader import ConfigError, LoadedConfig, load_config
from klaw.home import KlawHome

if TYPE_CHECKING:
    from klaw.store.sqlite.store import SqliteStore

err_console = Console(stderr=True)


def home_from_env() -> KlawHome:
    return KlawHome.from_env()


def load_or_exit(home: KlawHome) -> LoadedConfig:
    """The effective configuration, or exit 2 with the validation message (no traceback)."""
    try:
        return load_config(home.config_file)
    except ConfigError as exc:
        fail(str(exc))


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


async def open_store_or_exit(path: Path) -> SqliteStore:
    """klaw.db for a command that reads or edits it, or exit 2 with the store's message (a file SQLite
    cannot open, sqlite-vec that will not load and how to reinstall it), never a traceback."""
    from klaw.store.protocol import StorageError
    from klaw.store.sqlite.store import SqliteStore  # apsw and sqlite-vec only for commands that need them

    try:
        return await SqliteStore.open(path)
    except StorageError as exc:
        fail(str(exc))
