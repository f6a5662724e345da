"""`klaw db info`: what klaw.db holds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from klaw.cli.context import home_from_env, load_or_exit, open_store_or_exit
from klaw.store.sqlite.query import fetch_all

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
    asyncio.run(_info(path))


async def _info(path: Path) -> None:
    store = await open_store_or_exit(path)
    try:
        version = await store.schema_version()
        counts = await store.db.run(
            lambda c: fetch_all(
                c,
                "SELECT 'chats', count(*) FROM chats UNION ALL SELECT 'segments', count(*) FROM segments"
                " UNION ALL SELECT 'messages', count(*) FROM messages"
                " UNION ALL SELECT 'exchanges', count(*) FROM exchanges"
                " UNION ALL SELECT 'pending embeddings', count(*) FROM embedding_jobs WHERE status = 'pending'"
                " UNION ALL SELECT 'failed embeddings', count(*) FROM embedding_jobs WHERE status = 'failed'",
            )
        )
        meta = await store.db.run(lambda c: fetch_all(c, "SELECT table_name, embedder_id, dim FROM index_meta"))
        vectors = await store.vectors.count()
    finally:
        await store.aclose()
    table = Table(title=f"{path} (schema version {version})")
    table.add_column("what")
    table.add_column("count", justify="right")
    for name, count in [*counts, ("message vectors", vectors)]:
        table.add_row(str(name), str(count))
    console = Console()
    console.print(table)
    for name, embedder_id, dim in meta:
        console.print(f"{name}: embedder {embedder_id}, dim {dim}")
