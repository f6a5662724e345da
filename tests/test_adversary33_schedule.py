"""adversary33 (decision 542), the scheduled tasks: a one-off task added beside an older engine never fired (the
file migrated under it, "It runs while an engine runs"); a scheduler.db of a newer klaw was a traceback, and
`remove` deleted a row of it; `klaw schedule run` said "try again" when the engine died during the run; a second
`klaw schedule run` was told to kill the first; a `--at` time the clocks skip or show twice was taken silently.
Real engines (`klaw engine` processes, one of them the klaw of 4b3f6f93), real scheduler.db files, the fake
OpenAI-protocol server; the commands as typed, through klaw's own entry point."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduledTask, ScheduleStore
from tests.cli.klaw_here import klaw_here
from tests.engine import short_socket_dir
from tests.gateway.test_engine_killed_mid_burst import write_config
from tests.serve_helpers import STARTS_WITHIN

REPOSITORY = Path(__file__).resolve().parents[1]
OLDER_KLAW = "4b3f6f93"  # the klaw before decision 526: scheduler.db schema 4, no `schedule` query


def _version(home: KlawHome) -> int:
    with sqlite3.connect(home.scheduler_db) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


@asynccontextmanager
async def _engine(home: KlawHome, source: Path | None = None) -> AsyncIterator[asyncio.subprocess.Process]:
    """`klaw engine` on `home` (of the klaw in `source`/src when given) until its socket answers; killed after."""
    env = {**os.environ, "KLAW_HOME": str(home.root)}
    if source is not None:
        env["PYTHONPATH"] = str(source / "src")
    with (home.root.parent / "engine.err").open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "klaw", "engine", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=err
        )
    try:
        async with asyncio.timeout(STARTS_WITHIN):
            while True:
                assert process.returncode is None, (home.root.parent / "engine.err").read_text()
                try:
                    _, writer = await asyncio.open_unix_connection(str(home.socket_path))
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                break
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _slow(asked: asyncio.Event, held: asyncio.Event) -> Callable[[], Awaitable[object]]:
    """The model's reply held back: `asked` set once the run asked it, the answer given once `held` is set."""

    async def hold() -> None:
        asked.set()
        await held.wait()

    return hold


def _older_klaw(directory: Path) -> Path:
    """The source of klaw at OLDER_KLAW, unpacked in `directory`; the test is skipped without that history."""
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", OLDER_KLAW, "src"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.skip(f"no git history with {OLDER_KLAW} here")
    subprocess.run(["tar", "x", "-C", str(directory)], input=archive.stdout, check=True)
    return directory


async def test_beside_an_older_engine_the_file_is_not_migrated_and_an_at_task_is_refused_in_words(
    tmp_path: Path,
) -> None:
    older = _older_klaw(tmp_path)
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            write_config(home, server.base_url)
            with home.config_file.open("a", encoding="utf-8") as config:
                config.write("scheduler:\n  timezone: UTC\n")
            async with _engine(home, older):
                assert _version(home) == 4
                soon = f"{datetime.now(UTC) + timedelta(minutes=2):%Y-%m-%d %H:%M}"
                once = await asyncio.to_thread(klaw_here, home.root, "schedule", "add", "new1", "--at", soon, "-m", "x")
                assert _version(home) == 4  # not moved to 5 under an engine that cannot read it
                hourly = await asyncio.to_thread(
                    klaw_here, home.root, "schedule", "add", "tea", "--every", "1h", "-m", "tea?"
                )
                listed = await asyncio.to_thread(klaw_here, home.root, "schedule", "list")
                ran = await asyncio.to_thread(klaw_here, home.root, "schedule", "run", "tea")
                assert _version(home) == 4
    said = " ".join(once.stderr.split())
    assert once.returncode == 1, once
    assert "is older than this klaw (it does not know the `schedule` query)" in said, said
    assert "a one-off task (--at) needs schema 5" in said and "Nothing was added" in said, said
    assert "`klaw serve` again" in said, said
    assert hourly.returncode == 0, hourly.stderr
    assert "The engine running on this home is older than this klaw; it reads the table within a minute." in (
        " ".join(hourly.stdout.split())
    ), hourly.stdout
    assert listed.returncode == 0 and "tea" in listed.stdout and "new1" not in listed.stdout, listed
    assert ran.returncode == 1 and "so it cannot run a task now" in " ".join(ran.stderr.split()), ran


def test_a_scheduler_db_of_a_newer_klaw_is_named_and_left_untouched_by_every_command(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    store = ScheduleStore(home.scheduler_db)
    store.create()
    store.add(ScheduledTask("d1387", TaskSchedule.every("1h"), "x", None, None, created_at=datetime.now(UTC)))
    with sqlite3.connect(home.scheduler_db) as db:
        db.execute("PRAGMA user_version = 6")
    for command in (
        ("list",),
        ("add", "new", "--every", "1h", "-m", "x"),
        ("remove", "d1387"),
        ("run", "d1387"),
        ("runs", "d1387"),
    ):
        done = klaw_here(home.root, "schedule", *command)
        said = " ".join(done.stderr.split())
        assert done.returncode == 1, (command, done)
        assert "was made by a newer klaw (schema version 6; this klaw knows up to 5)" in said, (command, said)
        assert "leaves it untouched" in said and "Traceback" not in said, said
    with sqlite3.connect(home.scheduler_db) as db:
        assert db.execute("SELECT name FROM tasks").fetchall() == [("d1387",)]
        assert db.execute("PRAGMA user_version").fetchone()[0] == 6


async def test_an_engine_killed_during_schedule_run_is_said_as_an_interrupted_run(tmp_path: Path) -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            write_config(home, server.base_url)
            asked, held = asyncio.Event(), asyncio.Event()
            server.reply_text("too late", before=_slow(asked, held))  # the model is slow: the run is under way
            async with _engine(home) as engine:
                added = await asyncio.to_thread(
                    klaw_here, home.root, "schedule", "add", "tea", "--every", "1h", "-m", "x"
                )
                assert added.returncode == 0, added.stderr
                ran = asyncio.create_task(asyncio.to_thread(klaw_here, home.root, "schedule", "run", "tea"))
                await asyncio.wait_for(asked.wait(), STARTS_WITHIN)
                engine.send_signal(signal.SIGKILL)
                await engine.wait()
                done = await ran
                held.set()
    said = " ".join(done.stderr.split())
    assert done.returncode == 1, done
    assert "stopped during the run of tea, so the run was interrupted" in said, said
    assert "`klaw schedule runs tea`" in said and "try again" not in said, said


async def test_a_second_schedule_run_is_told_a_run_is_under_way_not_to_kill_it(tmp_path: Path) -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            write_config(home, server.base_url)
            asked, held = asyncio.Event(), asyncio.Event()
            server.reply_text("tea time", before=_slow(asked, held))
            added = await asyncio.to_thread(klaw_here, home.root, "schedule", "add", "tea", "--every", "1h", "-m", "x")
            assert added.returncode == 0, added.stderr
            env = {**os.environ, "KLAW_HOME": str(home.root)}
            first = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "klaw", "schedule", "run", "tea", env=env, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                await asyncio.wait_for(asked.wait(), STARTS_WITHIN)
                second = await asyncio.to_thread(klaw_here, home.root, "schedule", "run", "tea")
                held.set()
                out, _ = await first.communicate()
            finally:
                if first.returncode is None:
                    first.kill()
                    await first.wait()
    said = " ".join(second.stderr.split())
    assert second.returncode == 75, second
    assert f"a run is under way on this home: `klaw schedule run tea` (pid {first.pid}) is running task tea" in said
    assert "wait for it (it prints the answer)" in said and "kill" not in said, said
    assert first.returncode == 0 and "tea time" in out.decode(), out
