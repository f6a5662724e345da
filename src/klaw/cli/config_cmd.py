"""`klaw config show|path|check`."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from klaw.cli.context import home_from_env, load_or_exit
from klaw.config_view import config_rows

app = typer.Typer(help="Inspect the engine configuration (engine.yaml).", no_args_is_help=True)


@app.command()
def show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: {field: {value, source}}.")] = False,
    reveal: Annotated[bool, typer.Option("--reveal", help="Show passwords in URLs instead of a mask.")] = False,
) -> None:
    """Print every effective setting and where it came from (default, engine.yaml, or env)."""
    loaded = load_or_exit(home_from_env())
    rows = config_rows(loaded, mask=not reveal)  # masked: this output gets pasted into bug reports and chats
    if as_json:
        typer.echo(json.dumps({row.field: {"value": row.value, "source": row.source} for row in rows}, indent=2))
        return
    table = Table(title=f"Effective configuration ({loaded.path})")
    for column in ("field", "value", "source"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row.field, json.dumps(row.value), row.source)
    Console(markup=False).print(table)


@app.command()
def path() -> None:
    """Print the path of engine.yaml."""
    typer.echo(str(home_from_env().config_file))


@app.command()
def check() -> None:
    """Validate engine.yaml (exit 2 with the reason when it is invalid)."""
    loaded = load_or_exit(home_from_env())
    typer.echo(f"{loaded.path}: valid")
