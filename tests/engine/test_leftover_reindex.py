"""An engine started after an interrupted `klaw reindex` says, in one line, what it left and the ways out.

A reindex killed outright leaves `klaw.db.reindex` and `klaw.db.reindex.lock` beside the database;
before, the engine started silently and the files stayed with nothing saying what they were.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine.harness import engine_config


def leftover_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "interrupted 'klaw reindex'" in r.getMessage()]


async def start_and_stop(home: KlawHome) -> None:
    async with FakeOpenAiServer() as server:
        engine = await Engine.start(home, engine_config(server.base_url), listen=False)
        await engine.shutdown(timeout_seconds=5)


async def test_the_engine_names_a_killed_reindexs_files_and_how_to_resume_or_discard(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    caplog.set_level(logging.WARNING)
    await start_and_stop(home)
    assert leftover_warnings(caplog) == []  # nothing left: nothing said
    database = Path(home.root) / "klaw.db"
    # What kill -9 of `klaw reindex` leaves: its build and its lock file (a lock dies with its process).
    for suffix in (".reindex", ".reindex.lock"):
        database.with_name(database.name + suffix).write_bytes(b"")
    caplog.clear()
    await start_and_stop(home)
    [warning] = leftover_warnings(caplog)
    assert "klaw.db.reindex, klaw.db.reindex.lock" in warning and str(home.root) in warning
    assert "run 'klaw reindex' to finish it" in warning and "delete those files to discard it" in warning


async def test_forget_in_a_chat_discards_the_unfinished_build_that_holds_the_text(tmp_path: Path) -> None:
    """adversary29 (decision 503): what a killed reindex left still held a forgotten text. `/forget` in a chat
    (the engine's path; `klaw memory forget` has its own test) discards it and says so."""
    from tests.engine.harness import running_engine
    from tests.engine.test_memory_tools_turns import command

    async with running_engine(tmp_path) as h:
        assert (await h.turn("my pin is 4321 kiwi")).text.endswith("my pin is 4321 kiwi")
        database = Path(h.home.root) / "klaw.db"
        left = [database.with_name(database.name + suffix) for suffix in (".reindex", ".reindex-wal")]
        for path in left:  # as a build read before the forget holds it (its pages, its WAL)
            path.write_bytes(b"SQLite format 3\x00 ... my pin is 4321 kiwi ...")
        answer = await command(h, "/forget last")
        assert "held it too and was discarded" in answer and str(left[0]) in answer, answer
        assert not any(path.exists() for path in left)
        assert (await h.turn("my name is Ann")).text.endswith("my name is Ann")
        answer = await command(h, "/forget last")  # nothing left over now: nothing said of a build
        assert answer.startswith("Forgot") and "unfinished build" not in answer, answer
