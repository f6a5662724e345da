"""The `klaw` command line loads its ~800 modules without the cyclic collector walking them (decision 411),
and never leaves it off: every command runs with it on, an engine's once the engine started. Asserted on
the real command line's collector as it exits (`gc`'s own counts), never on a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.test_start_imports import run_probe

# The `klaw` script's entry point, with the collector's state written out as the process exits.
PROGRAM = """
import atexit, gc, json, sys
out = sys.argv[1]
def say():
    stats = [generation["collections"] for generation in gc.get_stats()]
    state = {"enabled": gc.isenabled(), "collections": stats, "frozen": gc.get_freeze_count()}
    open(out, "w").write(json.dumps(state))
atexit.register(say)
sys.argv = ["klaw", *sys.argv[2:]]
from klaw.cli import main
main()
"""


async def collector_at_exit(tmp_path: Path, env: dict[str, str], *args: str, stdin: str = "") -> dict[str, Any]:
    state: dict[str, Any] = await run_probe(PROGRAM, tmp_path / "collector.json", env, args, stdin)
    return state


async def test_a_chats_start_runs_no_full_collection_and_leaves_the_collector_on(tmp_path: Path) -> None:
    """A piped chat's start walks its ~80,000 objects in no full collection: its start-up heap is frozen as
    it is (decisions 303, 411); the collector is on for its turn. Before, the start ran two or three full and
    a dozen or more older-generation collections walking the modules just loaded."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("ok")
        state = await collector_at_exit(tmp_path, chat_env(home, model.base_url), "chat", stdin="hi\n")
    assert state["enabled"] and state["frozen"] > 0, state
    assert state["collections"][2] == 0, state


async def test_a_command_that_starts_no_engine_runs_with_the_collector_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    for args in (["config", "path"], ["config", "show"]):
        state = await collector_at_exit(tmp_path, chat_env(home, "http://127.0.0.1:9/v1"), *args)
        assert state["enabled"] and state["frozen"] == 0, (args, state)
