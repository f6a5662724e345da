"""After a kill -9, a held call whose question was open is told to the model as never approved, not as
"may or may not have taken effect"; one approved and cut off mid-run keeps those words (decision 447).
A library Klaw in a subprocess (custom tools, the `approve` callback) is SIGKILLed with one chat's question
open and the other's approved call running; a Klaw on the same home resumes both chats. On PostgreSQL, a
Klaw on another home sharing the database takes both chats over and reads the same (decision 466)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from klaw import AgentInfo, ChatMessage, ChatResponse, FunctionModel, Klaw
from tests.conftest import new_database
from tests.pg_server import PgServer
from tests.test_library import CONFIG

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from klaw import FunctionModel, Klaw, call_tool, tool_calls

    async def host_exec(command: str) -> str:
        '''Run a command on the host.'''
        print("RUNNING", flush=True)
        await asyncio.Event().wait()
        return "never"

    def model(messages, info):
        command = "wait" if "alice" in messages[-1].content else "hang"
        return tool_calls(call_tool("host_exec", {"command": command}))

    async def approve(chat, question):
        if "wait" in question:
            print("ASKED", flush=True)
            await asyncio.Event().wait()
        return True

    async def main():
        model_ = FunctionModel(model)
        async with Klaw(sys.argv[1], config=CONFIG, model=model_, tools=[host_exec], approve=approve) as k:
            await asyncio.gather(k.ask("alice", "alice: clean up"), k.ask("bob", "bob: clean up"))

    asyncio.run(main())
    """
)


async def test_an_open_question_at_a_kill_is_told_as_never_approved_and_a_running_call_as_unknown(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    config = {**CONFIG, "tools": {"approval": ["host_exec"]}, "processing": {"debounceMs": 0}}
    await _killed_with_a_question_open(home, config)
    told = await _resumed(home, config)
    assert "(it was never approved)" in told["alice"], told  # was "may or may not have taken effect"
    assert "may or may not have taken effect" in told["bob"], told  # approved, cut off mid-run: unknown
    noted = home / "approvals-open.json"
    assert noted.read_text() == "{}" and noted.stat().st_mode & 0o777 == 0o600  # taken by the chat's turn


async def test_an_engine_sharing_the_database_takes_the_chat_over_with_the_call_never_approved(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dead engine's note is in its own home, which the other engine never reads: the store's copy
    is what tells it (decision 466). Old code: the other engine's model read "may or may not"."""
    dsn = postgres_server.dsn(new_database(postgres_server))
    monkeypatch.setenv("KLAW_TEST_SHARED_URL", dsn)
    database = {"backend": "postgres", "urlEnv": "KLAW_TEST_SHARED_URL", "leaseSeconds": 1}  # A's run out soon
    config = {**CONFIG, "tools": {"approval": ["host_exec"]}, "processing": {"debounceMs": 0}, "database": database}
    await _killed_with_a_question_open(tmp_path / "a", config)
    told = await _resumed(tmp_path / "b", config)
    assert "(it was never approved)" in told["alice"], told
    assert "may or may not have taken effect" in told["bob"], told
    with psycopg.connect(dsn) as connection:  # the shared note taken by the chat's turn
        assert connection.execute("SELECT key FROM settings WHERE key LIKE 'approvals_open:%'").fetchall() == []


async def _killed_with_a_question_open(home: Path, config: dict[str, object]) -> None:
    """A library Klaw in a child process, SIGKILLed with alice's question open and bob's approved call running."""
    code = f"CONFIG = {config!r}\n" + SCRIPT
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, str(home), stdout=asyncio.subprocess.PIPE, env=env
    )
    try:
        assert child.stdout is not None
        async with asyncio.timeout(60):  # a safety net: each line comes as soon as its state is reached
            seen = {(await child.stdout.readline()).strip(), (await child.stdout.readline()).strip()}
    finally:
        child.send_signal(signal.SIGKILL)  # the question open, the approved call running
        assert await child.wait() == -signal.SIGKILL
    assert seen == {b"ASKED", b"RUNNING"}


async def _resumed(home: Path, config: dict[str, object]) -> dict[str, str]:
    """What a Klaw on `home` tells its model of each chat's cut-off call as it resumes both: the last tool result."""
    told: dict[str, str] = {}
    done = asyncio.Event()

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        results = [m for m in messages if m.role == "tool"]
        user = next(str(m.content) for m in messages if m.role == "user")
        told[user.split(":")[0]] = str(results[-1].content) if results else ""
        if len(told) == 2:
            done.set()
        return "ok"

    async with Klaw(home, config=config, model=FunctionModel(model)):
        await asyncio.wait_for(done.wait(), 20)
    return told


TORN_DOWN = textwrap.dedent(
    """
    import asyncio, sys
    from klaw import FunctionModel, Klaw, call_tool, tool_calls

    async def host_exec(command: str) -> str:
        '''Run a command on the host.'''
        return "ran"

    def interrupt():
        raise KeyboardInterrupt  # as a Ctrl-C out of klaw chat's prompt task did (newcomer18)

    async def approve(chat, question):
        asyncio.get_running_loop().call_soon(interrupt)
        await asyncio.Event().wait()

    async def main():
        model = FunctionModel(lambda messages, info: tool_calls(call_tool("host_exec", {"command": "ls"})))
        async with Klaw(sys.argv[1], config=CONFIG, model=model, tools=[host_exec], approve=approve) as k:
            await k.ask("alice", "alice: clean up")

    asyncio.run(main())
    """
)


async def test_a_question_open_when_the_loop_is_torn_down_is_told_as_never_approved(tmp_path: Path) -> None:
    """asyncio.run cancels what is left when a KeyboardInterrupt stops its loop: the cancelled question
    took its call out of the note, and the next start told the model it "may or may not have taken effect"
    for a call nobody approved (newcomer18, after a Ctrl-C at klaw chat's y/N prompt; decision 463)."""
    home = tmp_path / "home"
    config = {**CONFIG, "tools": {"approval": ["host_exec"]}, "processing": {"debounceMs": 0}}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"CONFIG = {config!r}\n" + TORN_DOWN, str(home), stderr=asyncio.subprocess.PIPE, env=env
    )
    _, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode != 0 and b"KeyboardInterrupt" in err, err  # torn down, the question open
    told: list[str] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        told.extend(str(m.content) for m in messages if m.role == "tool")
        return "ok"

    async with Klaw(home, config=config, model=FunctionModel(model)) as k:
        await asyncio.wait_for(k.ask("alice", "anything done?"), 20)
    assert told and "(it was never approved)" in told[0], told  # was "may or may not have taken effect"
