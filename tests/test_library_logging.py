"""A program using klaw as a library decides where klaw's log lines go, as with any Python library: klaw
gives its `klaw` logger a NullHandler, so without the program's own logging set-up nothing of klaw's is
printed on its stderr (before, Python's last-resort handler printed bare lines such as "turn of chat
library:z failed: …" into the program's output), and with `logging.basicConfig` they appear as usual."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
import asyncio, sys
{setup}
from klaw import FunctionModel, Klaw, TurnFailed

def broken(messages, info):
    raise RuntimeError("the model's code has a bug")

async def main():
    config = {{"embedder": {{"backend": "fake", "dim": 32}}, "summarizer": {{"enabled": False}}}}
    async with Klaw(sys.argv[1], config=config, model=FunctionModel(broken)) as agent:
        try:
            await agent.ask("z", "hello")
        except TurnFailed as failed:
            print("the program caught:", failed)

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("setup", "printed_by_klaw"),
    [("", False), ("import logging; logging.basicConfig(level=logging.WARNING)", True)],
    ids=["no logging set up", "logging.basicConfig"],
)
def test_klaws_log_lines_reach_stderr_only_when_the_program_sets_up_logging(
    tmp_path: Path, setup: str, printed_by_klaw: bool
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(setup=setup), str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "the program caught:" in done.stdout
    assert ("turn of chat library:z failed" in done.stderr) is printed_by_klaw, done.stderr
