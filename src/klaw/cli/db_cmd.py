"""`klaw db info`: what the database holds; `klaw db migrate --to postgres`: move a home into PostgreSQL."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from klaw.cli.context import (
    fail,
    home_from_env,
    load_or_exit,
    open_store_or_exit,
    print_whole,
    stderr_console,
    stdout_console,
)
from klaw.cli.vector_gap import vector_gap
from klaw.home import KlawHome

if TYPE_CHECKING:
    from klaw.config import DatabaseConfig, EngineConfig
    from klaw.store.protocol import StoreCounts

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Inspect the home's database (klaw.db, or PostgreSQL), or move the home into PostgreSQL.",
    no_args_is_help=True,
)


@app.command()
def info() -> None:
    """Schema version, row counts, which embedder filled each vector table, the full-text tokenizer."""
    home = home_from_env()
    loaded = load_or_exit(home)
    asyncio.run(_info(home.database_file(loaded.config.database.path), loaded.config.database))


async def _info(path: Path, database: DatabaseConfig) -> None:
    from klaw.store.protocol import StoreNotSetUp

    try:
        store = await open_store_or_exit(path, database, reads_only=True)
    except StoreNotSetUp as exc:  # no klaw.db, no klaw tables yet: said, exit 0, nothing made (decisions 442, 467)
        from klaw.memory.reindex_leftover import leftover_reindex_notes

        typer.echo(f"{exc}.")
        for note in await asyncio.to_thread(leftover_reindex_notes, path, database):  # a first reindex killed (503)
            typer.echo(f"But {note}.")
        raise typer.Exit(0) from None
    try:
        version = await store.schema_version()
        counts = await store.counts()
        indexes = await store.vector_indexes()
    finally:
        await store.aclose()
    table = Table(title=f"{_where(path, database)} (schema version {version})")
    table.add_column("what")
    table.add_column("count", justify="right")
    rows = [
        ("chats", counts.chats),
        ("segments", counts.segments),
        ("messages", counts.messages),
        ("control records (/new, /model, exchange marks)", counts.control_records),
        ("exchanges", counts.exchanges),
        ("pending embeddings", counts.embedding_pending),
        ("failed embeddings", counts.embedding_failed),
        ("message vectors", counts.vectors),
    ]
    for name, count in rows:
        table.add_row(name, str(count))
    console = stdout_console()
    print_whole(console, table)
    for index in indexes:
        console.print(f"{index.name}: embedder {index.embedder_id}, dim {index.dim}")
    if database.backend == "postgres":  # a generated tsvector; database.tokenizer is SQLite's FTS5 setting
        console.print("full text: PostgreSQL tsvector (english stemming), ranked by bm25")
    else:  # the store opened, so its full-text index uses the configured tokenizer (it refuses another)
        console.print(f"full text: tokenizer {database.tokenizer}")


def _where(path: Path, database: DatabaseConfig) -> str:
    """The home's database as a person finds it: klaw.db's path, or the variable naming the PostgreSQL
    server (never the connection string: it holds a password)."""
    if database.backend == "postgres":
        return f"PostgreSQL database named by {database.url_env}"
    return str(path)


@app.command()
def migrate(
    to: Annotated[str, typer.Option("--to", help="The backend to move into: postgres.")],
    url_env: Annotated[
        str | None,
        typer.Option(
            "--url-env",
            help="Name of the environment variable holding the PostgreSQL connection string (default:"
            " database.urlEnv, else KLAW_DATABASE_URL).",
        ),
    ] = None,
    samples: Annotated[
        int,
        typer.Option(
            "--samples",
            min=0,
            help="Sample queries searched in klaw.db and in PostgreSQL, their results compared (0: none).",
        ),
    ] = 20,
) -> None:
    """Move this home's memory into an empty PostgreSQL database: rebuilt from the conversation log (as
    klaw reindex does, with progress bars), settings copied from klaw.db, then checked: row counts
    compared, and sample queries (texts of stored messages) searched in both, their results compared.
    Exits 1 when the check finds a difference.

    Stop the engine first. Interrupted, it resumes where it stopped when run again. klaw.db and the
    JSONL log are left as they were (forgetting on the PostgreSQL home does not reach them: delete them
    once it runs well). engine.yaml is then set to database.backend: postgres and urlEnv (only those lines
    change; the file as it was is kept beside it), unless the check found a difference."""
    home = home_from_env()
    loaded = load_or_exit(home)
    if to != "postgres":
        fail(f"klaw db migrate moves a home into postgres only, not {to!r}: use --to postgres")
    from klaw.config import ENV_VAR_NAME

    variable = url_env or loaded.config.database.url_env or "KLAW_DATABASE_URL"
    if not ENV_VAR_NAME.match(variable):
        fail("--url-env takes the NAME of an environment variable (e.g. KLAW_DATABASE_URL), not its value")
    if not asyncio.run(_migrate(home, loaded.config, variable, samples)):
        raise typer.Exit(1)


async def _migrate(home: KlawHome, config: EngineConfig, variable: str, samples: int) -> bool:
    """The move and its check; False when the check found a difference."""
    from klaw.cli.db_search_check import check_searches
    from klaw.cli.reindex_cmd import run_with_bars
    from klaw.config import DatabaseConfig
    from klaw.store.backend import migration_backend
    from klaw.store.protocol import StorageError

    sqlite_file = home.database_file(config.database.path)
    try:
        backend = migration_backend(sqlite_file, variable)
    except StorageError as exc:
        fail(str(exc))
    console = stdout_console()
    report = await run_with_bars(
        console, home, config, backend, "the PostgreSQL database is left as it is", "klaw db migrate --to postgres"
    )
    target = DatabaseConfig(backend="postgres", url_env=variable)
    source = DatabaseConfig(backend="sqlite", path=config.database.path) if sqlite_file.exists() else None
    counted = await _compare(console, sqlite_file, source, target, report.records)
    searched = True
    if source is not None and samples:
        searched = await check_searches(console, home, config, (sqlite_file, source, target), samples)
    switched = _switched(home.config_file, variable, counted and searched)
    if counted and searched:
        switched = f"{switched} {_service_words(home.root, variable)}"
    console.print(switched, highlight=False, soft_wrap=True)
    if counted and searched:
        from klaw.cli.database_overrides import database_overrides

        for warning in database_overrides(home.config_file, home.root):  # they outrank engine.yaml (decision 486)
            stderr_console(highlight=False).print(warning, soft_wrap=True)
    console.print(_left_behind(home, sqlite_file), highlight=False, soft_wrap=True)
    return counted and searched


def _switched(config_file: Path, variable: str, checked: bool) -> str:
    """engine.yaml switched to PostgreSQL by the move itself, so no chat goes on into klaw.db unseen
    (newcomer19, decision 476); when the check found a difference, or the file is not one it can edit
    line by line, it is left as it is and the line to change is named."""
    from klaw.cli.db_move_config import switch_to_postgres

    if not checked:
        return (
            f"engine.yaml is left on SQLite, as the check found a difference. {_config_change(config_file, variable)}"
        )
    switched = switch_to_postgres(config_file, variable)
    if switched is None:
        change = _config_change(config_file, variable)
        return f"engine.yaml is not one klaw edits by line, so it is left as it is. {change}"
    kept = f" (the file as it was is {switched.kept})" if switched.kept is not None else ""
    return (
        f"{config_file} now says database backend: postgres and urlEnv: {variable}, the rest of it unchanged{kept}:"
        f" klaw runs on PostgreSQL from its next start. The way back is that copy (and klaw.db, below)."
    )


def _service_words(root: Path, variable: str) -> str:
    """A service gets only what service.env sets, not this shell's variables (check52, decision 480)."""
    from klaw.cli.service_env import SERVICE_ENV, names_in

    env_file = root / SERVICE_ENV
    try:
        there = variable in names_in(env_file)
    except (OSError, UnicodeDecodeError):
        there = False
    if there:
        return f"A service (klaw service install) gets {variable} from {env_file}, which sets it."
    return (
        f"A service (klaw service install) needs {variable} in its environment too: it reads {env_file}, which"
        f" klaw service install writes (--copy-env copies {variable} from this shell); a service installed"
        f" before: add {variable}=... to that file, then restart it."
    )


def _config_change(config_file: Path, variable: str) -> str:
    """What to change in engine.yaml, by line, when the move did not (`_switched`): `klaw init` wrote a
    `database:` section (backend: sqlite), so adding a second one as a whole would be refused ('database' is
    already set)."""
    wanted = f"backend: postgres and urlEnv: {variable}"
    try:
        lines = config_file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    section = next((n for n, line in enumerate(lines) if re.match(r"database:\s*(#.*)?$", line)), None)
    if section is None:
        return f"Now add to {config_file}:  database: {{backend: postgres, urlEnv: {variable}}}"
    body: list[tuple[int, str]] = []
    for number in range(section + 1, len(lines)):
        line = lines[number]
        if line.strip() and not line[0].isspace() and not line.lstrip().startswith("#"):
            break
        body.append((number, line))
    backend = next((n for n, line in body if re.match(r"\s+backend:", line)), None)
    if backend is None:
        return f"Now, under 'database:' at line {section + 1} of {config_file}, add {wanted}."
    return (
        f"Now, in the 'database:' section at line {section + 1} of {config_file}, change line {backend + 1}"
        f" ({lines[backend].strip()}) to backend: postgres and set urlEnv: {variable} beside it."
    )


def _left_behind(home: KlawHome, sqlite_file: Path) -> str:
    """What the move left in KLAW_HOME: the SQLite copy, which the PostgreSQL home no longer uses; forgetting
    there reaches it and `klaw backup` leaves it out (decision 539)."""
    from klaw.memory.forget_words import chat_logs_removal
    from klaw.scheduling.names import TASK_LOG_DIR_PREFIX

    return (
        f"{sqlite_file} and the chats' JSONL log under {home.conversations} are left as they were: the way back"
        " to SQLite. `klaw memory forget` and /forget on the PostgreSQL home erase what they forget from them"
        " too (the JSONL files rewritten, klaw.db deleted when it holds any of it), and klaw backup leaves them"
        " out. Once the home runs well on PostgreSQL, delete them"
        f" (rm {sqlite_file}*; {chat_logs_removal(home.conversations)})."
        f" Keep {home.conversations}/{TASK_LOG_DIR_PREFIX}*: the scheduled tasks' run logs stay files."
    )


_ROW_NAMES = {"vectors": "message vectors", "embedding_pending": "waiting to be embedded"}


async def _compare(
    console: Console, sqlite_file: Path, source: DatabaseConfig | None, target: DatabaseConfig, records: int
) -> bool:
    """Row counts of klaw.db beside PostgreSQL's: the same log gives the same rows."""
    after = await _counts(sqlite_file, target)
    before = await _counts(sqlite_file, source) if source is not None else None
    table = Table(title=f"moved {records} log records into PostgreSQL ({target.url_env})")
    table.add_column("what")
    table.add_column("klaw.db", justify="right")
    table.add_column("PostgreSQL", justify="right")
    fields = ("chats", "segments", "messages", "control_records", "exchanges", "vectors", "embedding_pending")
    differ = []
    for name in fields:
        new = getattr(after, name)
        old_value = "" if before is None else str(getattr(before, name))
        if before is not None and getattr(before, name) != new and name not in ("vectors", "embedding_pending"):
            differ.append(name)
        table.add_row(_ROW_NAMES.get(name, name.replace("_", " ")), old_value, str(new))
    print_whole(console, table)
    if before is not None and (gap := vector_gap(before, after)):
        console.print(gap, highlight=False, soft_wrap=True)
    if differ:
        console.print(
            f"warning: {', '.join(differ)} differ from klaw.db: klaw.db may hold rows its log does not (or the"
            " other way round); run 'klaw reindex' on the SQLite home and compare again"
        )
    return not differ


async def _counts(path: Path, database: DatabaseConfig) -> StoreCounts:
    store = await open_store_or_exit(path, database)
    try:
        return await store.counts()
    finally:
        await store.aclose()
