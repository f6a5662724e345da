"""A home copied with `cp -a` while `klaw serve` runs on it, as docs/maintenance.md's "Back up, restore,
upgrade" tells a person to: the copy opens cleanly (klaw.db in WAL mode with its -wal beside it, the lock
file not held by anyone in the copy) and holds what the running home held."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.serve_helpers import running, serve_config, serve_env, stop, web_page, write_serve_home


def test_a_home_copied_while_klaw_serve_runs_opens_cleanly(tmp_path: Path) -> None:
    home = a_home(tmp_path)  # six messages in the log
    copy = tmp_path / "copy"

    async def copied_while_serving() -> None:
        async with FakeOpenAiServer() as model:
            write_serve_home(home, serve_config(model.base_url))
            assert klaw_here(home, "reindex").returncode == 0  # klaw.db holds them
            async with running(env=serve_env(home)) as serve:
                await web_page(serve)  # the engine holds klaw.db open (WAL) and the home's lock
                await asyncio.to_thread(subprocess.run, ["cp", "-a", str(home), str(copy)], check=True)
                assert await stop(serve) == 0

    asyncio.run(copied_while_serving())

    info = klaw_here(copy, "db", "info")
    assert info.returncode == 0, info.stderr
    messages = next(line for line in info.stdout.splitlines() if "messages" in line)
    assert messages.split()[-2] == "6", info.stdout
    found = klaw_here(copy, "memory", "search", "--chat", "console:me", "lighthouse")
    assert found.returncode == 0 and "lighthouse" in found.stdout, found.stderr
    assert "Traceback" not in info.stderr + found.stderr
