"""A `Klaw(home)` refused because another program's `Klaw` holds the home (decision 538, newcomer24 item 22): the
refusal named the holder, then suggested the web page (which a library program does not serve) and
`Klaw(home, listen=True)` for the other program, in one long paragraph. Now it says what holds it (pid, program)
and the two fixes that apply: end that program (or close its Klaw), or give this one a home of its own. The
holder is a real second process, a program of its own as newcomer24's was."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from klaw import EngineAlreadyRunningError, FunctionModel, Klaw

REPO = Path(__file__).resolve().parents[1]
PROGRAM = """
import asyncio, sys
from klaw import FunctionModel, Klaw

async def main() -> None:
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
    async with Klaw(sys.argv[1], config=config, model=FunctionModel(lambda m, i: "ok")):
        print("open", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

asyncio.run(main())
"""


async def test_the_refusal_names_the_program_and_the_fixes_that_apply(tmp_path: Path) -> None:
    home = tmp_path / "home"
    program = tmp_path / "my_bot.py"
    program.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    holder = await asyncio.create_subprocess_exec(
        sys.executable, str(program), str(home), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert await asyncio.wait_for(holder.stdout.readline(), 120) == b"open\n"
        config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
        with pytest.raises(EngineAlreadyRunningError) as refused:
            await Klaw(home, config=config, model=FunctionModel(lambda m, i: "ok")).start()
        said = str(refused.value)
        assert said.startswith(
            f"cannot start: a program using klaw's library API (pid {holder.pid}, program my_bot.py) is running on"
            f" {home}: end that program, or close its Klaw, first"
        ), said
        assert f"`kill {holder.pid}`" in said and "give this program a home of its own" in said, said
        assert "api/messages" not in said and "listen=True" not in said and "web" not in said, said  # not for it
    finally:
        holder.stdin.close()
        await asyncio.wait_for(holder.wait(), 60)
    assert holder.returncode == 0
