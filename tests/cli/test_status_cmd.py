"""`klaw status` (lefts55, decision 510): people typed it and got "No such command". It says whether an engine
runs on the home (exit 0) or not (exit 3), and of a running one its holder, pid, socket and /status lines (asked
over the socket's `status` query, which touches no chat), the stored counts `klaw db info` gives, and what a
scheduled task's last run met. A real engine listening on engine.sock, the command in process."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime

import yaml

from klaw import FunctionModel, Klaw
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduledTask, ScheduleStore
from klaw.store.records import ChatRef
from tests.cli.klaw_here import klaw_here
from tests.engine import short_socket_dir

SETTINGS = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


async def test_klaw_status_says_whether_an_engine_runs_and_how_it_does() -> None:
    with short_socket_dir() as root:
        home = root / "home"
        home.mkdir(mode=0o700)
        (home / "engine.yaml").write_text(yaml.safe_dump(SETTINGS), encoding="utf-8")
        down = await asyncio.to_thread(klaw_here, home, "status")
        assert down.returncode == 3, down.stderr
        assert down.stdout.startswith(f"No engine is running on {home}: `klaw serve` starts one"), down.stdout
        assert "Stored: nothing stored yet" in down.stdout

        store = ScheduleStore(home / "scheduler.db")
        store.create()
        store.add(
            ScheduledTask("tg", TaskSchedule.every("1h"), "hi", None, ChatRef("telegram", "1"), datetime.now(UTC))
        )
        store.record_run("tg", datetime.now(UTC), "completed", "its replies reach nobody: the bot is off")
        async with Klaw(home, model=FunctionModel(lambda _m, _i: "hello"), listen=True) as agent:
            assert await agent.ask("console:me", "hi") == "hello"
            up = await asyncio.to_thread(klaw_here, home, "status")
            as_json = await asyncio.to_thread(klaw_here, home, "status", "--json")
    assert up.returncode == 0, up.stderr
    lines = up.stdout.splitlines()
    assert lines[0].startswith(f"An engine is running on {home}: ") and lines[0].count(f"pid {os.getpid()}") == 1
    assert f"socket {home / 'engine.sock'}, running since " in lines[0], lines
    assert any(line.startswith("Uptime: ") for line in lines), lines
    assert any(line.startswith("Queue depth: 0 waiting for an LLM slot") for line in lines), lines
    assert any(line.startswith("Scheduled tasks: ") for line in lines), lines
    assert not any(line.startswith(("Model: ", "Segment started: ")) for line in lines), lines  # a chat's lines
    assert "Stored: 1 chat(s), 2 message(s); embeddings" in up.stdout, up.stdout
    assert "Last run of task tg: its replies reach nobody: the bot is off" in lines
    data = json.loads(as_json.stdout)
    # asked after the text, still one chat: /status would have made the asking chat's session
    assert data["running"] is True and data["pid"] == os.getpid() and data["stored"]["chats"] == 1, data
