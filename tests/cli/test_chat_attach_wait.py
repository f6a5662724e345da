"""A piped `klaw chat` beside another piped one waits for it to leave (newcomer21, decision 502); beside a
terminal it goes into that terminal's chat at once (newcomer23, decision 527: it waited up to 5 minutes).
The lock is held here by another open file of the same attached.lock (flock locks belong to the open file), as
another `klaw chat` holds it; the whole way, with `klaw serve` and a terminal in tmux, is
tests/cli/test_chat_piped_beside_terminal.py."""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path

import pytest
import typer

from klaw.cli.chat_attach import one_terminal


def _held(directory: Path, content: str) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "attached.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, content.encode())
    return fd


async def test_a_piped_chat_beside_a_terminal_goes_beside_it_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "kept"
    holder = _held(directory, "4242 terminal\n")
    try:
        async with one_terminal(directory, "`klaw serve` (pid 7)", tmp_path, piped=True, wait_seconds=30) as beside:
            assert beside  # its message goes into the terminal's chat (decision 527): no wait
            assert (directory / "attached.lock").read_text() == "4242 terminal\n"  # still the terminal's
        assert "waiting" not in capsys.readouterr().err
    finally:
        os.close(holder)


async def test_a_piped_chat_waits_for_another_piped_one_then_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "kept"
    holder = _held(directory, "4242 piped\n")
    entered = asyncio.Event()

    async def pipe() -> None:
        async with one_terminal(directory, "`klaw serve` (pid 7)", tmp_path, piped=True, wait_seconds=30) as beside:
            assert not beside
            entered.set()
            assert (directory / "attached.lock").read_text() == f"{os.getpid()} piped\n"  # for the next to read

    task = asyncio.create_task(pipe())
    await asyncio.sleep(0.5)
    assert not entered.is_set()  # waiting, not refused
    said = " ".join(capsys.readouterr().err.split())
    assert "another piped `klaw chat` (pid 4242) is attached to `klaw serve` (pid 7) on" in said, said
    assert "waiting for it to leave (up to 30 s; it ends with its reply)" in said, said
    os.close(holder)  # the other pipe ends
    await asyncio.wait_for(task, 10)
    assert entered.is_set()


async def test_a_piped_chat_gives_up_after_its_wait_and_a_second_terminal_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "kept"
    holder = _held(directory, "4243 piped\n")
    try:
        with pytest.raises(typer.Exit) as gave_up:
            async with one_terminal(directory, "`klaw serve` (pid 7)", tmp_path, piped=True, wait_seconds=0.5):
                pytest.fail("entered while held")
        assert gave_up.value.exit_code == 75  # try again later, as a piped chat waiting for another (487)
        said = " ".join(capsys.readouterr().err.split())
        assert "another piped `klaw chat` (pid 4243) is attached to `klaw serve` (pid 7)" in said, said
        assert "error: not sent: another piped `klaw chat` (pid 4243) is still attached to" in said, said
        with pytest.raises(typer.Exit) as refused:
            async with one_terminal(directory, "`klaw serve` (pid 7)", tmp_path):
                pytest.fail("a second terminal entered")
        assert refused.value.exit_code == 2  # a person's terminal: leave the other first, as before
        assert "leave it first (/exit or Ctrl-D)" in capsys.readouterr().err
    finally:
        os.close(holder)
