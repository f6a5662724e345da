"""A read-only home, a full disk, a log file that cannot be written and a damaged klaw.db, met by `klaw …`
as a person runs it: one line naming the file system (or the file) and the fix, never a traceback
(adversary8; decision 320).

Before: `memory list` on a read-only home said "unable to open database file" (or ended in an apsw
ReadOnlyError traceback from `PRAGMA optimize` at close), `schedule list` in a sqlite3 traceback,
`memory forget` in a raw OSError traceback, `klaw chat` and every start on a full disk in `error: [Errno
28] No space left on device`; a full log file printed logging's "--- Logging error ---" and a traceback
for every record; a damaged page ended a chat whose reply had arrived in an apsw.CorruptError traceback.

A read-only or full file system needs a mount of its own: a small tmpfs, which needs root (as CI runs);
without root a read-only home is a folder whose mode forbids writing."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.piped_chat import piped
from tests.own_disk import fill, tmpfs

NO_TRACE = ("Traceback", "Logging error")


async def _klaw(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`klaw ARGS`, a command that ends by itself, run by klaw's entry point in this process (decision 451,
    tests/cli/klaw_here.py): its words and exit status are the point, and each was a `klaw` process of ~1.2 s of
    CPU, 14 in this file. The chats stay processes (`piped`). On a thread of its own: the command runs its own
    event loop."""
    home = Path(env["KLAW_HOME"])
    return await asyncio.to_thread(lambda: klaw_here(home, *args, env=env | {"COLUMNS": "300"}))


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    said = " ".join(result.stderr.split())
    assert result.returncode != 0, result.stdout
    assert not any(word in result.stderr for word in NO_TRACE), result.stderr
    assert said.startswith("error: ") and said.count("error:") == 1, result.stderr
    return said


async def _chatted_home(home: Path, model: FakeOpenAiServer) -> dict[str, str]:
    init_home(home)
    env = chat_env(home, model.base_url)
    code, out, err = await piped(env, "hello\n")
    assert (code, out) == (0, "Hi.\n"), err
    return env


async def test_a_read_only_home_is_named_with_the_fix_by_every_command(tmp_path: Path) -> None:
    """Every command, and `klaw config check`, which says klaw cannot run on this home (one home for both: the
    check was a test of its own, with a chat and a mount of its own)."""
    async with FakeOpenAiServer() as model:
        model.reply_text("Hi.")
        root = os.geteuid() == 0
        with tmpfs(tmp_path / "mnt", "8m") if root else _nothing(tmp_path / "mnt") as mnt:
            home = mnt / "home"
            env = await _chatted_home(home, model)
            assert (await _klaw(env, "schedule", "add", "walk", "-m", "hi", "--every", "1d")).returncode == 0
            assert (await _klaw(env, "config", "check")).returncode == 0
            if root:
                _remount_read_only(mnt)
                cannot = f"is on a read-only file system (mounted at {mnt}): klaw writes its home there. Remount"
            else:
                for path in (home, *home.rglob("*")):
                    path.chmod(path.stat().st_mode & ~0o222)
                cannot = "cannot be written: permission denied. klaw writes its home as the user running it"
            checked = await _klaw(env, "config", "check")
            said = _one_line(checked)
            assert checked.returncode == 1, checked.stderr
            assert said.startswith(f"error: {home / 'engine.yaml'} is valid, but klaw cannot run on this home: ")
            assert cannot in said and "set KLAW_HOME to a folder you can write" in said
            fix = f"mount -o remount,rw {mnt}" if root else "chmod u+w"
            assert fix in _one_line(await _klaw(env, "memory", "forget", "exchange", "1"))
            # A listing reads (newcomer7: `schedule list` refused a read-only mount `memory list` read).
            for args in (("schedule", "list"), ("memory", "list"), ("db", "info")):
                result = await _klaw(env, *args)
                # klaw.db is read where SQLite can (its -shm left by an engine); scheduler.db always
                if result.returncode == 0 or args == ("schedule", "list"):
                    assert result.returncode == 0 and result.stdout.strip(), (args, result.stderr)
                    assert args != ("schedule", "list") or "walk" in result.stdout, result.stdout
                    assert not any(word in result.stderr for word in NO_TRACE), result.stderr
                    continue
                assert fix in _one_line(result), (args, result.stderr)
            code, out, err = await piped(env, "still there?\n")
            said = " ".join(err.split())
            assert code != 0 and out == "" and "Traceback" not in err, err
            assert said.startswith("error: ") and fix in said and "engine.lock" in said, err


def _remount_read_only(mnt: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)


@contextmanager
def _nothing(where: Path) -> Iterator[Path]:
    where.mkdir()
    try:
        yield where
    finally:
        for path in (where, *where.rglob("*")):
            path.chmod(path.stat().st_mode | 0o700)


async def test_a_full_disk_names_its_mount_and_the_fix(tmp_path: Path) -> None:
    async with FakeOpenAiServer() as model:
        model.reply_text("Hi.")
        with tmpfs(tmp_path / "mnt", "3m") as mnt:
            home = mnt / "home"
            env = await _chatted_home(home, model)
            assert (await _klaw(env, "schedule", "add", "walk", "-m", "hi", "--every", "1d")).returncode == 0
            filler = fill(mnt)
            code, said, err = await piped(env, "one more\n")
            assert code != 0 and not any(word in err for word in NO_TRACE), err
            assert f"free space on {mnt}" in " ".join(err.split()), err
            # A command that only reads reads (decision 431: all refused, as SQLite could not size WAL's -shm)
            for args, shown in (
                (("memory", "list"), "exchange 1"),
                (("memory", "search", "hello"), "hello"),
                (("db", "info"), "messages"),
                (("schedule", "list"), "walk"),
            ):
                result = await _klaw(env, *args)
                assert result.returncode == 0 and shown in result.stdout, (args, result.stderr)
                assert not any(word in result.stderr for word in NO_TRACE), result.stderr
            # A writer refuses, exit 1 whichever command met it (decision 320), naming the mount and the fix
            writers = (("schedule", "add", "t", "-m", "hi", "--every", "1d"), ("memory", "forget", "exchange", "1"))
            for writer in writers:
                result = await _klaw(env, *writer)
                assert f"free space on {mnt}" in _one_line(result) and result.returncode == 1, (writer, result.stderr)
            filler.unlink()  # space again: the lock file a full disk left empty holds nobody
            code, said, err = await piped(env, "and now?\n")
            assert code == 0 and said.strip(), err


async def test_a_log_file_on_a_full_disk_is_one_line_not_a_traceback_per_record(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full, the device every write to fails with ENOSPC")
    home = tmp_path / "home"
    init_home(home)
    deep = home / "workspace" / "skills" / "deep"  # a skill left out, with a warning each turn
    deep.mkdir(parents=True)
    (deep / "SKILL.md").write_text("---\nname: deep\ndescription: d\nx: " + "[" * 3000 + "]" * 3000 + "\n---\n")
    (home / "logs").mkdir(mode=0o700, exist_ok=True)
    (home / "logs" / "chat.log").symlink_to("/dev/full")
    async with FakeOpenAiServer() as model:
        model.reply_text("Hi.")
        code, out, err = await piped(chat_env(home, model.base_url), "hello\nagain\n")
    assert code == 0 and out.startswith("Hi.\n"), err
    assert not any(word in err for word in NO_TRACE), err
    lines = [line for line in err.splitlines() if "log lines cannot be written" in line]
    assert len(lines) == 1 and "no space left" in lines[0], err


async def test_a_damaged_page_is_named_with_reindex_after_the_reply(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        model.reply_text("Hi.")
        init_home(home)
        env = chat_env(home, model.base_url)
        words = "".join(f"message {n} about the garden and the weather {n * 7}\n" for n in range(40))
        code, out, err = await piped(env, words)
        assert code == 0, err
        database = home / "klaw.db"
        assert database.stat().st_size > 24 * 4096
        with database.open("r+b") as damaged:
            damaged.seek(20 * 4096)
            damaged.write(os.urandom(4096))
        code, out, err = await piped(env, "hi\n")
    assert code == 0 and out.strip(), err  # the reply, then the words, not a traceback and exit 1
    assert not any(word in err for word in NO_TRACE), err
    log = (home / "logs" / "chat.log").read_text(encoding="utf-8")
    assert "klaw reindex" in " ".join((err + log).split()), err
