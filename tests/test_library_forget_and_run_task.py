"""`Klaw.forget` and `Klaw.run_task` (newcomer24 items 12 and 14, decision 540): a program could forget only by
asking `/forget` as a message, whose refusal was an ordinary string, and could not run a scheduled task at all;
beside its non-listening `Klaw`, `klaw schedule run tick` exited 75 "end that program first" with no word of
what works, and `klaw schedule add` said the task "runs while an engine runs (`klaw serve`, …)" though the
program's own engine runs it. A real home, the fake model server, the CLI in process beside the program."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from klaw import ForgetError, Klaw, TaskRun, TaskRunRefused
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.klaw_here import klaw_here
from tests.serve_helpers import serve_config, write_serve_home


async def test_a_program_forgets_and_runs_a_task_and_the_cli_beside_it_says_what_works(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        write_serve_home(home, serve_config(model.base_url, channels=None))
        async with Klaw(home) as agent:
            assert "remember the gate code" in await agent.ask("alice", "remember the gate code")  # echoed
            with pytest.raises(ForgetError) as refused:  # before: a reply "Cannot forget: …" from ask
                await agent.forget("alice", "exchange 99")
            assert "99" in str(refused.value) and not str(refused.value).startswith("Cannot forget")
            said = await agent.forget("alice", "last")
            assert said.startswith("Forgot"), said
            assert not [e for e in await agent.history("alice") if "gate code" in e.text]

            env = {"COLUMNS": "400"}
            adding: tuple[str, ...] = ("schedule", "add", "tick", "--every", "1h", "--message", "say tick")
            adding += ("--inject-into", "console:bob", "--new-chat")
            added = await asyncio.to_thread(klaw_here, home, *adding, env=env)
            assert added.returncode == 0, added.stderr
            words = " ".join(added.stdout.split())
            assert (
                "a program using klaw's library API" in words and "its engine reads the table within a minute" in words
            )
            assert "`klaw serve`" not in words, words
            ran = await asyncio.to_thread(klaw_here, home, "schedule", "run", "tick", env=env)
            assert ran.returncode == 75, ran.stdout
            refusal = " ".join(ran.stderr.split())
            assert "await agent.run_task('tick')" in refusal and "listen=True" in refusal, refusal

            await asyncio.sleep(0)  # the engine reads scheduler.db when asked: no minute to wait
            model.reply_text("tick!")
            run = await agent.run_task("tick")
            assert isinstance(run, TaskRun) and run.status == "completed" and run.answer == "tick!", run
            with pytest.raises(TaskRunRefused, match="there is no task named 'tock'"):
                await agent.run_task("tock")
