"""What is wrong with the environment variable `database.urlEnv` names, in words, without psycopg.

`connection.dsn_from_env` raises them as a `StorageError` where the store opens; a library program's `Klaw.start`
raises them as a `ConfigError` before (decision 538): a variable left unset is the configuration's fault, not
the database's, and `except klaw.ConfigError` is what the docs tell a program to catch for it. One place for the
words; never the variable's value (it holds a password)."""

from __future__ import annotations

import os


def dsn_problem(variable: str | None) -> str | None:
    """Why no connection string can be read from `variable` (unnamed, or unset in the environment); None: one can."""
    if not variable:
        return (
            "database.backend is postgres but database.urlEnv is not set: name the environment variable"
            " holding the connection string (e.g. urlEnv: KLAW_DATABASE_URL) in engine.yaml"
        )
    if not os.environ.get(variable, "").strip():
        return (
            f"the environment variable {variable} (database.urlEnv) is not set: export"
            f" {variable}=postgresql://user:password@host:5432/klaw before starting klaw"
        )
    return None
