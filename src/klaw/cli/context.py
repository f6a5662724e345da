"""What every command needs: the home directory, the loaded config, and friendly failures."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

from klaw.config_loader import ConfigError, LoadedConfig, load_config
from klaw.home import KlawHome

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
