"""A program's `config=` held against the store the home's engine.yaml names, before the engine starts
(decision 539).

A given `config=` is used as given (docs/library.md), so its `database` is SQLite's default when it names
none. newcomer24 moved a home with `klaw db migrate --to postgres` (engine.yaml switched to PostgreSQL) and
ran the same program again: it went on writing into the klaw.db the move had left, `/status` said SQLite,
and nothing warned; the home's commands, its service and its backups looked at PostgreSQL. So:

- engine.yaml names PostgreSQL and the `config=` SQLite: refused (`ConfigError`) with the `database` to add
  to `config=`. A PostgreSQL engine.yaml is never a default: a person or the move wrote it, so the home's
  memory is there.
- Both PostgreSQL through different variables, or both SQLite on different files of which engine.yaml's
  exists: a warning naming both; the program may mean it (a variable naming the same server, a test file).
- engine.yaml on SQLite (what `klaw init` and the library's own first start write) and the `config=` on
  PostgreSQL: the way a program configures a new home, left alone unless klaw.db exists (a warning).

engine.yaml is read as the command line reads it (its `KLAW__` overrides included); one that does not load
is left to the commands that read it.
"""

from __future__ import annotations

import json
import logging

from klaw.config import DatabaseConfig, EngineConfig
from klaw.config_loader import ConfigError, load_config
from klaw.home import KlawHome

log = logging.getLogger("klaw.library")


def check_store(home: KlawHome, given: EngineConfig) -> None:
    """Refuse or warn when the program's `config=` keeps the memory elsewhere than engine.yaml does."""
    if not home.config_file.is_file():
        return
    try:
        recorded = load_config(home.config_file).config.database
    except (ConfigError, OSError):
        return
    mine = given.database
    named = _named(home, recorded)
    if recorded.backend == "postgres" and mine.backend == "sqlite":
        raise ConfigError(
            f"the config= given to Klaw keeps the memory in SQLite ({home.database_file(mine.path)}"
            f"{'' if mine.path != 'klaw.db' else ', its default when config= has no database'}), but this"
            f" home's engine.yaml keeps it in {named} ('klaw db migrate' moves a home so): this program would"
            " write where the home's engine, commands and backups do not look. Add"
            f" {_database_entry(recorded)} to config=, or leave config= out to use engine.yaml"
        )
    if _same(home, recorded, mine):
        return
    if recorded.backend == "sqlite" and not home.database_file(recorded.path).exists():
        return  # engine.yaml's default on a home that never ran on it: a program configuring a new home
    log.warning(
        "the config= given to Klaw keeps the memory in %s, but this home's engine.yaml keeps it in %s: the"
        " home's commands (klaw memory, klaw backup) and engine read that one; to use it, add %s to config=",
        _named(home, mine),
        named,
        _database_entry(recorded),
    )


def _same(home: KlawHome, one: DatabaseConfig, other: DatabaseConfig) -> bool:
    if one.backend != other.backend:
        return False
    if one.backend == "postgres":
        return one.url_env == other.url_env
    return home.database_file(one.path).resolve() == home.database_file(other.path).resolve()


def _named(home: KlawHome, database: DatabaseConfig) -> str:
    if database.backend == "postgres":
        return f"the PostgreSQL database named by {database.url_env}"
    return f"SQLite ({home.database_file(database.path)})"


def _database_entry(database: DatabaseConfig) -> str:
    """The `database` entry of a `config=` dict that names `database`, as Python."""
    if database.backend == "postgres":
        entry = {"backend": "postgres", "urlEnv": database.url_env}
    else:
        entry = {"backend": "sqlite", "path": database.path}
    return f'"database": {json.dumps(entry)}'
