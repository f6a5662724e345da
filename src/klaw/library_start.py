"""What a `Klaw`'s `start` does before the engine: the home made (only its missing files), the configuration
read (the program's `config=` as given, else the home's engine.yaml), the home made private.

Kept apart from library.py, whose job is the engine's life and its calls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from klaw.config import EngineConfig
from klaw.config_loader import config_from_mapping, load_config
from klaw.engine.config_drift import ConfigFileNote
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.home_privacy import describe_changes, make_private

log = logging.getLogger("klaw.library")


def prepared(
    home: KlawHome, config: EngineConfig | Mapping[str, Any] | None
) -> tuple[EngineConfig, ConfigFileNote | None]:
    """The home made and private, and the configuration with engine.yaml's bytes it was parsed from (None: the
    program's `config=`, which an edit of the file does not concern)."""
    initialise_home(home)  # writes only the files that are missing
    loaded = _configuration(home, config)
    # What others could read of the home made private, as every `klaw` command does (decision 237), said in a
    # warning; never a database.path outside the home: it may be another program's (decision 478).
    if changed := make_private(home):
        log.warning("%s", describe_changes(changed))
    return loaded


def _configuration(
    home: KlawHome, config: EngineConfig | Mapping[str, Any] | None
) -> tuple[EngineConfig, ConfigFileNote | None]:
    if isinstance(config, EngineConfig):
        return config, None
    if config is not None:
        return config_from_mapping(config, "the config= given to Klaw"), None
    loaded = load_config(home.config_file)
    return loaded.config, ConfigFileNote.of(loaded)
