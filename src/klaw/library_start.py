"""What a `Klaw`'s `start` does before the engine: the home made (only its missing files), the configuration
read (the program's `config=` as given, else the home's engine.yaml), the home made private.

What a person can get wrong here is raised as klaw's own errors, so `except klaw.KlawError` catches it
(decision 538, newcomer24): a home that is a file, or that cannot be made (`HomeUnusable`; a raw
`FileExistsError` before), and a PostgreSQL database whose `urlEnv` variable is unset (`ConfigError`, the
store's words; a `StorageError` before, which the docs name for a database that cannot do what was asked).

Kept apart from library.py, whose job is the engine's life and its calls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from klaw.config import EngineConfig
from klaw.config_loader import ConfigError, config_from_mapping, load_config
from klaw.engine.config_drift import ConfigFileNote
from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.home_privacy import describe_changes, make_private
from klaw.library_store_check import check_store
from klaw.store.postgres.dsn_variable import dsn_problem

log = logging.getLogger("klaw.library")


class HomeUnusable(KlawError, OSError):
    """`Klaw(home)` names no folder klaw can use: a file, or a place it may not create or write (the OSError's
    words, with the path); an `OSError` too, as the bare one it was before."""


def prepared(
    home: KlawHome, config: EngineConfig | Mapping[str, Any] | None
) -> tuple[EngineConfig, ConfigFileNote | None]:
    """The home made and private, and the configuration with engine.yaml's bytes it was parsed from (None: the
    program's `config=`, which an edit of the file does not concern)."""
    root = home.root
    if root.exists() and not root.is_dir():
        raise HomeUnusable(f"{root} is a file, not a klaw home: give Klaw a folder (it is created if missing)")
    above = next((folder for folder in root.parents if folder.exists()), None)
    if above is not None and not above.is_dir():
        raise HomeUnusable(f"cannot make the klaw home {root}: {above} is a file, not a folder")
    try:
        initialise_home(home)  # writes only the files that are missing
    except OSError as exc:
        raise HomeUnusable(f"cannot make the klaw home {root}: {_said(exc)}: give Klaw a folder it may write") from exc
    loaded = _configuration(home, config)
    database = loaded[0].database
    if database.backend == "postgres" and (problem := dsn_problem(database.url_env)) is not None:
        raise ConfigError(problem)
    # What others could read of the home made private, as every `klaw` command does (decision 237), said in a
    # warning; never a database.path outside the home: it may be another program's (decision 478).
    if changed := make_private(home):
        log.warning("%s", describe_changes(changed))
    return loaded


def _said(exc: OSError) -> str:
    """`Permission denied: /srv/klaw` from an OSError, or its type when it has no words."""
    words = exc.strerror or type(exc).__name__
    return f"{words}: {exc.filename}" if exc.filename else words


def _configuration(
    home: KlawHome, config: EngineConfig | Mapping[str, Any] | None
) -> tuple[EngineConfig, ConfigFileNote | None]:
    if config is not None:
        given = config if isinstance(config, EngineConfig) else config_from_mapping(config, "the config= given to Klaw")
        check_store(home, given)  # a program left on klaw.db after the home moved to PostgreSQL (decision 539)
        return given, None
    loaded = load_config(home.config_file)
    return loaded.config, ConfigFileNote.of(loaded)
