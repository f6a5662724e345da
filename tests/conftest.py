"""Fixtures shared by the whole suite: a temporary KLAW_HOME and a real SQLite store on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from klaw.home import KlawHome
from klaw.store.sqlite.store import SqliteStore


@pytest.fixture
def home(tmp_path: Path) -> KlawHome:
    return KlawHome(tmp_path / "klaw-home")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        yield opened
    finally:
        await opened.aclose()
