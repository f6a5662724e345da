"""A program using klaw as a library keeps its umask, and klaw still writes nothing others can read
(decision 237): directories 0700, files 0600, whatever the program's umask.

A real Python program sets the usual umask 022, opens `Klaw(home)` on a fresh home with a dict config
against the fake OpenAI-protocol server over HTTP, runs turns whose tools save a core memory, a memory
and a workspace file and schedule a task, lets the task run on a manual clock, searches its memory and
closes. Then every path of the home is walked: the person's own workspace files keep their modes, the
rest is private, and the program's umask is still 022. A home left readable is tightened when
`Klaw(home)` starts, with a logged warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import stat
import sys
from pathlib import Path

import pytest

from klaw import Klaw
from klaw.llm.fake_server import FakeOpenAiServer

PROGRAM = r"""
import asyncio, json, os, sys

os.umask(0o022)  # the usual umask of a program: klaw must not need it changed, nor change it
from pathlib import Path

from klaw import Klaw, ManualClock


def modes(home):
    # the test's `modes`, while files come and go (a journal SQLite deletes after its transaction)
    root, found = Path(home), {}
    for path in [root, *root.rglob("*")]:
        try:
            found[str(path.relative_to(root))] = f"{path.lstat().st_mode & 0o777:o}"
        except FileNotFoundError:
            pass
    return found


async def approve(chat, question):
    return True  # host_exec is held for approval: the person says yes


async def main(home, base_url):
    clock = ManualClock()
    config = {
        "models": {"fake/x": {"baseUrl": base_url, "maxRetries": 0}},
        "routing": {"default": "fake/x"},
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "scheduler": {"timezone": "UTC"},
        "hostExec": {"allow": ["touch *"]},
    }
    async with Klaw(home, config=config, clock=clock, approve=approve) as agent:
        first = await agent.ask("alice", "remember me, note the list and tell me the news every minute")
        scheduler = agent.engine.scheduler
        await scheduler.wait_asleep()
        (task,) = await scheduler.list_tasks()
        await clock.advance((task.next_run_at - clock.now()).total_seconds())
        await scheduler.runner.wait_for_completed(1)
        await scheduler.wait_asleep()
        second = await agent.ask("alice", "what was the news?")
        await agent.engine.embedding_queue.wait_idle()
        hits = await agent.search_memory("alice", "news")
        while_open = modes(home)  # the database's -wal and -shm, the held engine.lock
    said = {"replies": [first, second], "hits": len(hits), "open": while_open, "umask": os.umask(0o022)}
    print(json.dumps(said))


if sys.argv[3] == "uvloop":  # as a program on uvloop runs it; uvloop refused subprocess's umask=
    import uvloop

    uvloop.run(main(sys.argv[1], sys.argv[2]))
else:
    asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def modes(home: Path) -> dict[str, str]:
    """Every path under `home` (home included, as ".") with its permission bits in octal."""
    return {str(path.relative_to(home)): f"{stat.S_IMODE(path.lstat().st_mode):o}" for path in [home, *home.rglob("*")]}


def loose(found: dict[str, str], home: Path, theirs: set[str]) -> list[str]:
    """The paths not 0700 (directories) or 0600 (files), the person's own `theirs` left out."""
    wrong = []
    for name, mode in found.items():
        if name in theirs:
            continue
        expected = "700" if (home / name).is_dir() else "600"
        if mode != expected:
            wrong.append(f"{name} {mode}")
    return sorted(wrong)


async def run_program(home: Path, base_url: str, loop: str) -> dict[str, object]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROGRAM,
        str(home),
        base_url,
        loop,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    said: dict[str, object] = json.loads(out.decode().splitlines()[-1])
    return said


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_a_library_program_under_umask_022_keeps_it_and_writes_nothing_others_can_read(
    tmp_path: Path, loop: str
) -> None:
    home = tmp_path / "home"
    # The person's own files in the workspace, readable by others on purpose: klaw leaves them alone.
    (home / "workspace" / "photos").mkdir(parents=True)
    (home / "workspace" / "shared.txt").write_text("for everyone", encoding="utf-8")
    for path, mode in ((home, 0o700), (home / "workspace", 0o700), (home / "workspace" / "photos", 0o755)):
        path.chmod(mode)
    (home / "workspace" / "shared.txt").chmod(0o644)
    async with FakeOpenAiServer() as server:
        server.reply_tool_calls(
            [
                ("memory_core_update", {"set": {"name": "Ada"}}),
                ("memory_save", {"text": "Ada likes the morning news"}),
                ("file_write", {"path": "notes/list.md", "content": "milk\n"}),
                ("schedule_add", {"name": "news", "cron": "* * * * *", "message": "Report the news"}),
                ("host_exec", {"command": "touch made-by-a-command.txt"}),
            ]
        )
        server.reply_text("Done, Ada.")
        server.reply_text("the news: all quiet")  # the task's run
        server.reply_text("All quiet.")
        said = await run_program(home, server.base_url, loop)

    assert said["replies"] == ["Done, Ada.", "All quiet."]
    assert said["umask"] == 0o022  # the program's umask is its own: klaw never changed it
    assert isinstance(said["hits"], int) and said["hits"] > 0
    theirs = {"workspace/shared.txt", "workspace/photos"}
    while_open = said["open"]
    assert isinstance(while_open, dict) and {"klaw.db-wal", "klaw.db-shm", "engine.lock"} <= set(while_open)
    assert loose(while_open, home, theirs) == []
    found = modes(home)
    created = set(found)
    assert {
        "klaw.db",
        "scheduler.db",
        "engine.yaml",
        "engine.lock",
        "core_memory.json",
        "workspace/SOUL.md",
        "workspace/notes/list.md",
        "workspace/made-by-a-command.txt",
        "workspace/skills",
    } <= created
    assert any(name.startswith("conversations/library_alice/") for name in created)
    assert any(name.startswith("conversations/scheduler_news/") for name in created)
    assert loose(found, home, theirs) == []
    assert (found["workspace/shared.txt"], found["workspace/photos"]) == ("644", "755")


async def test_klaw_makes_a_home_others_can_read_private_at_start_and_logs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    (home / "conversations" / "library_alice").mkdir(parents=True)
    diary = home / "conversations" / "library_alice" / "2026-01-01.jsonl"
    diary.write_text("", encoding="utf-8")
    (home / "workspace").mkdir()
    mine = home / "workspace" / "mine.txt"
    mine.write_text("the person's", encoding="utf-8")
    for path, mode in ((home, 0o755), (home / "conversations", 0o755), (diary, 0o644), (mine, 0o644)):
        path.chmod(mode)
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
    with caplog.at_level(logging.WARNING, logger="klaw"):
        async with Klaw(home, config=config):
            assert loose(modes(home), home, {"workspace/mine.txt"}) == []
    warned = [record.getMessage() for record in caplog.records if "other users could read" in record.getMessage()]
    assert len(warned) == 1 and "made them private" in warned[0]
    assert f"{mine.stat().st_mode & 0o777:o}" == "644"  # the person's own file
