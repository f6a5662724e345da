"""`klaw config show` beside a program running `Klaw(home, config={...})`: the table is engine.yaml's, which
that engine does not use, and a line under it says so (decision 456). Before, nothing said it: a developer
read engine.yaml's model and groups as the running engine's. The home's lock says where the holder's
configuration came from, so this holds whether the program listens on the socket or not."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from klaw import FunctionModel, Klaw
from klaw.home_lock import PROGRAM_CONFIG, holder_of
from tests.cli.test_cli import klaw

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


async def test_config_show_says_a_program_running_on_the_home_uses_its_own_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with Klaw(home, config=CONFIG, model=FunctionModel(lambda _m, _i: "ok")):
        holder = holder_of(home)
        assert holder is not None and holder.config == PROGRAM_CONFIG
        table = await asyncio.to_thread(klaw, home, "config", "show")
    said = " ".join(table.stdout.split())
    assert table.returncode == 0, table.stderr
    assert "a program using klaw's library API (pid " in said
    assert f"is running on {home} with the configuration it gave Klaw(config=...), not these values" in said
    assert holder_of(home) is None  # closed: nothing to say


async def test_a_program_on_the_files_own_config_is_not_said_to_differ(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "engine.yaml").write_text(json.dumps(CONFIG), encoding="utf-8")  # JSON is YAML
    async with Klaw(home, model=FunctionModel(lambda _m, _i: "ok")):
        holder = holder_of(home)
        assert holder is not None and holder.config == ""
