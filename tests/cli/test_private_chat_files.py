"""The files `klaw chat` keeps beside the conversation, its log (`logs/chat.log`, rotated) and its
input history (`chat_history`, written by prompt_toolkit), are created 0600 by their writers under
the usual umask 022, not only under the `klaw` command's umask (decision 237)."""

from __future__ import annotations

import io
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from klaw.channels.console_history import ConsoleHistory
from klaw.console_logging import LOG_FILE_BYTES, logs_through


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_the_chat_log_and_the_file_it_rotates_to_are_private(tmp_path: Path) -> None:
    log_file = tmp_path / "home" / "logs" / "chat.log"
    (tmp_path / "home").mkdir(mode=0o700)
    with logs_through(Console(file=io.StringIO()), log_file):
        logging.getLogger("klaw.test").warning("x" * (LOG_FILE_BYTES // 2 + 1))
        logging.getLogger("klaw.test").warning("y" * (LOG_FILE_BYTES // 2 + 1))  # past the size: rotated
        logging.getLogger("klaw.test").warning("after the rotation")
    rotated = log_file.with_name("chat.log.1")
    assert rotated.is_file() and "after the rotation" in log_file.read_text(encoding="utf-8")
    assert (mode(log_file.parent), mode(log_file), mode(rotated)) == (0o700, 0o600, 0o600)


@pytest.mark.usefixtures("umask_022")
def test_the_console_history_is_private_from_its_first_command(tmp_path: Path) -> None:
    path = tmp_path / "chat_history"
    history = ConsoleHistory(path)
    history.store_string("/new")
    assert "/new" in path.read_text(encoding="utf-8")
    assert mode(path) == 0o600
