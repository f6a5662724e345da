"""A `Klaw` lives on the event loop its `start` ran on (decision 538, newcomer24 item 5): a plain script calling
`asyncio.run(agent.start())` and then `asyncio.run(agent.ask(...))` ran each on a new loop; the first loop's end
had cancelled the engine's background work, the ask went on against what was left ("Embedding queue: 2
pending" for ever), `aclose` raised a bare "RuntimeError: Event loop is closed" and the home stayed locked for
the rest of the process. Now the call on another loop is refused with `OtherEventLoop` naming the cause and
what works, `asyncio.run(agent.aclose())` still lets the home go, and one `asyncio.Runner` across the steps (the
documented way for a script calling step by step) works. Plain (not async) tests: each `asyncio.run` is the
script's own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw, KlawError, OtherEventLoop
from tests.test_library import CONFIG


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return f"re: {messages[-1].content}"


def test_a_call_on_a_new_loop_is_refused_and_aclose_there_lets_the_home_go(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    agent = Klaw(home, config=CONFIG, model=FunctionModel(model))
    asyncio.run(agent.start())
    with pytest.raises(OtherEventLoop) as refused:
        asyncio.run(agent.ask("x", "my sister lives in Trondheim"))
    said = str(refused.value)
    assert "started on an event loop that has closed since" in said, said
    assert "asyncio.run(main())" in said and "asyncio.Runner" in said, said
    assert isinstance(refused.value, KlawError) and isinstance(refused.value, RuntimeError)
    with pytest.raises(OtherEventLoop):
        asyncio.run(agent.history("x"))
    with pytest.raises(OtherEventLoop):
        asyncio.run(agent.start())  # a started agent on another loop: not a silent "already started"

    asyncio.run(agent.aclose())  # raised RuntimeError: Event loop is closed before
    assert "closed from another event loop" in caplog.text
    assert Klaw.opened(home) is None

    # the home is free again in this process, and one Runner across the steps works
    with asyncio.Runner() as runner:
        again = runner.run(Klaw(home, config=CONFIG, model=FunctionModel(model)).start())
        assert runner.run(again.ask("x", "hello")) == "re: hello"
        assert [entry.text for entry in runner.run(again.history("x"))][-2:] == ["hello", "re: hello"]
        runner.run(again.aclose())


def test_a_call_from_another_thread_s_loop_says_where_the_engine_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    started = threading.Event()
    stop: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop | None = None
    agent = Klaw(home, config=CONFIG, model=FunctionModel(model))

    async def serve() -> None:
        nonlocal stop, loop
        stop, loop = asyncio.Event(), asyncio.get_running_loop()
        async with agent:
            started.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        assert started.wait(60)
        with pytest.raises(OtherEventLoop, match=r"which still runs it .*run_coroutine_threadsafe"):
            asyncio.run(agent.ask("x", "hi"))
        with pytest.raises(OtherEventLoop):
            asyncio.run(agent.aclose())  # not closed from here: its own loop finishes its turns
        assert loop is not None
        assert asyncio.run_coroutine_threadsafe(agent.ask("x", "hi"), loop).result(60) == "re: hi"
    finally:
        assert loop is not None and stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
    assert Klaw.opened(home) is None
