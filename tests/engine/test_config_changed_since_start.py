"""engine.yaml edited while klaw runs (newcomer16, decision 445): `/tools`, `/status` and `klaw tools` said the
running engine's rows with their fixes — `hostExec.allow` set, `mcp:weather` added — though the file now held
them, and nothing said to restart. Now each says "engine.yaml changed since klaw started: restart it to apply",
and an edit that changes no setting (a comment) says nothing. Each row keeps its own fix, and the restart is
said once under the rows: every row's fix giving way to "restart klaw" hid the fixes the edit had nothing to
do with (newcomer20, decision 489)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import yaml

from klaw import FunctionModel, Klaw
from tests.engine import short_socket_dir

SETTINGS = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
CHANGED = "engine.yaml changed since klaw started: restart it to apply"
HOST_EXEC_FIX = "list the commands it may run in hostExec.allow"


async def _klaw(home: Path, *args: str) -> tuple[str, str]:
    env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "200"}
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "klaw", *args, env=env, stdout=-1, stderr=-1)
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return out.decode(), err.decode()


async def test_an_engine_yaml_edited_after_the_start_is_said_with_restart_not_the_old_fix() -> None:
    with short_socket_dir() as root:
        home = root / "home"
        home.mkdir(mode=0o700)
        config = home / "engine.yaml"
        written = {**SETTINGS, "tools": {"enabled": ["clock", "host"]}}
        config.write_text(yaml.safe_dump(written), encoding="utf-8")
        async with Klaw(home, model=FunctionModel(lambda _m, _i: "ok"), listen=True) as agent:
            tools = await agent.ask("alice", "/tools")
            assert CHANGED not in tools and HOST_EXEC_FIX in tools, tools
            config.write_text("# a comment changes no setting\n" + yaml.safe_dump(written), encoding="utf-8")
            assert CHANGED not in await agent.ask("alice", "/tools")

            # The person applies the fix /tools gave: the engine still runs on what it read.
            config.write_text(yaml.safe_dump({**written, "hostExec": {"allow": ["ls"]}}), encoding="utf-8")
            tools = await agent.ask("alice", "/tools")
            assert tools.startswith("Tools for "), tools
            assert tools.splitlines()[-1].startswith(CHANGED), tools  # said once, under the rows
            assert "a fix above that engine.yaml already holds applies then" in tools, tools
            host = next(line for line in tools.splitlines() if line.startswith("- host_exec"))
            assert HOST_EXEC_FIX in host and "restart klaw" not in host, host  # its own fix, as it was
            status = await agent.ask("alice", "/status")
            assert status.startswith(CHANGED), status  # where a person looks first, above uptime and scheduler

            out, err = await _klaw(home, "tools")  # over the running engine's socket
            assert CHANGED in err and "Traceback" not in err, err
            assert HOST_EXEC_FIX in out and "restart klaw" not in out, out

            # newcomer18 (decision 464): `klaw config check` said "valid" as if the edit were in force.
            out, err = await _klaw(home, "config", "check")
            assert out.strip().endswith(": valid"), (out, err)
            assert f"warning: {CHANGED} (a program using klaw's library API" in err, err
