"""A damaged klaw.db met by a `klaw …` command is told by the check the background workers use
(`disk_trouble.damaged_database`, decision 326) and in their words, naming klaw.db's path where engine.yaml
(or its environment override) puts it (decision 364). Before: "a database in HOME is damaged (…). The
conversation log holds everything klaw.db had", a wording of its own, naming the folder only."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped


@pytest.mark.parametrize("where", ["klaw.db", "data/memory.db"])
async def test_a_damaged_klaw_db_is_named_by_its_path_in_the_workers_words(tmp_path: Path, where: str) -> None:
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        model.reply_text("Hi.")
        init_home(home)
        env = chat_env(home, model.base_url) | {"KLAW__DATABASE__PATH": where, "COLUMNS": "300"}
        words = "".join(f"message {n} about the garden and the weather {n * 7}\n" for n in range(40))
        code, _, err = await piped(env, words)
        assert code == 0, err
    database = home / where
    with database.open("r+b") as damaged:  # a page of the file overwritten: SQLite opens it, then reads junk
        damaged.seek(20 * 4096)
        damaged.write(os.urandom(4096))

    result = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "klaw", "db", "info"], capture_output=True, text=True, env=env
    )

    said = " ".join(result.stderr.split())
    assert result.returncode == 1 and "Traceback" not in said, result.stderr
    error = said[said.index("error: ") :]
    assert error == (
        "error: the command stopped: a database is damaged (database disk image is malformed), so trying again"
        f" cannot help. The conversation log holds everything {database} had: stop the engine and run"
        " `klaw reindex` to rebuild it."
    ), said
