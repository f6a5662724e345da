"""The `--backend` and `--url-env` options `klaw bench scale`, `turn` and `locomo` share (`SideBySide`,
`UrlEnvOption`): which
`database` sections one run measures, side by side in the same minutes.

PostgreSQL is the database whose connection string the variable `--url-env` names (default: the
home's `database.urlEnv`, else KLAW_DATABASE_URL); each bench builds its data in a schema of its own,
dropped after (`bench/bench_store.py`), so a person's tables are never touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # the command modules import only what Typer needs (decision 191)
    from klaw.config import DatabaseConfig

BACKENDS = ("sqlite", "postgres")
DEFAULT_URL_ENV = "KLAW_DATABASE_URL"

SideBySide = Annotated[
    list[str] | None,
    typer.Option(
        metavar="BACKEND", help="sqlite or postgres (repeatable: each size on each, side by side; default sqlite)."
    ),
]
UrlEnvOption = Annotated[
    str | None,
    typer.Option(help="postgres: the variable holding the connection string (default: database.urlEnv)."),
]


def chosen_backends(names: list[str]) -> list[str]:
    """`names` without repeats, in order; a name that is not a backend is a usage error naming it."""
    chosen: list[str] = []
    for name in names:
        if name not in BACKENDS:
            raise typer.BadParameter(f"{name!r} is not a backend: use sqlite or postgres", param_hint="--backend")
        if name not in chosen:
            chosen.append(name)
    return chosen


def backend_databases(
    database: DatabaseConfig, names: list[str], url_env: str | None, **update: Any
) -> dict[str, DatabaseConfig]:
    """The home's `database` section once per backend in `names`, with `update` applied to each, and the
    SQLite file always the default one, relative to the bench's own throwaway home: an absolute
    `database.path` of the person's would otherwise be where a bench engine writes (newcomer14)."""
    variable = url_env or database.url_env or DEFAULT_URL_ENV
    path = type(database).model_fields["path"].default
    return {
        name: database.model_copy(update={"backend": name, "url_env": variable, "path": path, **update})
        for name in chosen_backends(names)
    }


def unusable_backend(databases: dict[str, DatabaseConfig]) -> str | None:
    """A line naming the first backend that cannot be reached as configured (the variable, never its
    value), before anything is built; None when every one can."""
    from klaw.bench.bench_store import check_database
    from klaw.store.protocol import StorageError

    for name, database in databases.items():
        try:
            check_database(database)
        except StorageError as exc:
            return f"{name}: {exc}"
    return None
