"""`klaw config show|path|check`."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from klaw.cli.context import home_from_env, load_or_exit

app = typer.Typer(help="Inspect the engine configuration (engine.yaml).", no_args_is_help=True)


@app.command()
def show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: {field: {value, source}}.")] = False,
) -> None:
    """Print every effective setting and where it came from (default, engine.yaml, or env)."""
    loaded = load_or_exit(home_from_env())
    effective = loaded.config.model_dump(mode="json", by_alias=True)
    rows = list(_flatten(effective))
    if as_json:
        out = {key: {"value": value, "source": _source(key, loaded.sources)} for key, value in rows}
        typer.echo(json.dumps(out, indent=2))
        return
    table = Table(title=f"Effective configuration ({loaded.path})")
    for column in ("field", "value", "source"):
        table.add_column(column, overflow="fold")
    for key, value in rows:
        table.add_row(key, json.dumps(value), _source(key, loaded.sources))
    Console().print(table)


@app.command()
def path() -> None:
    """Print the path of engine.yaml."""
    typer.echo(str(home_from_env().config_file))


@app.command()
def check() -> None:
    """Validate engine.yaml (exit 2 with the reason when it is invalid)."""
    loaded = load_or_exit(home_from_env())
    typer.echo(f"{loaded.path}: valid")


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        here = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, here + ".")
        else:
            yield here, value


def _source(key: str, sources: Mapping[str, str]) -> str:
    """The source of `key`, or of the nearest configured ancestor (a whole section or model entry)."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:end]))
        if found:
            return found
    return "default"
