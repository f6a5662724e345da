"""`klaw db info`: what klaw.db holds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from klaw.cli.context import home_from_env, load_or_exit, open_store_or_exit
from klaw.config import DatabaseConfig

app = typer.Typer(help="Inspect the database (klaw.db).", no_args_is_help=True)


@app.command()
def info() -> None:
    """Schema version, row counts and which embedder filled each vector table."""
    home = home_from_env()
    loaded = load_or_exit(home)
    path = home.database_file(loaded.config.database.path)
    if not path.exists():
        typer.echo(f"{path} does not exist yet: it is created when the engine first starts.")
        raise typer.Exit(0)
    asyncio.run(_info(path, loaded.config.database))


async def _info(path: Path, database: DatabaseConfig) -> None:
    store = await open_store_or_exit(path, database)
    try:
        version = await store.schema_version()
        counts = await store.counts()
        indexes = await store.vector_indexes()
    finally:
        await store.aclose()
    table = Table(title=f"{path} (schema version {version})")
    table.add_column("what")
    table.add_column("count", justify="right")
    rows = [
        ("chats", counts.chats),
        ("segments", counts.segments),
        ("messages", counts.messages),
        ("control records", counts.control_records),
        ("exchanges", counts.exchanges),
        ("pending embeddings", counts.embedding_pending),
        ("failed embeddings", counts.embedding_failed),
        ("message vectors", counts.vectors),
    ]
    for name, count in rows:
        table.add_row(name, str(count))
    console = Console(markup=False)
    console.print(table)
    for index in indexes:
        console.print(f"{index.name}: embedder {index.embedder_id}, dim {index.dim}")
