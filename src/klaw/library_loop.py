"""The one event loop a `Klaw` lives on: the loop its `start` ran on, and what a call from another loop gets.

The engine's parts are asyncio objects of the loop that started them: its background work (the embedding
queue, summaries, scheduled tasks, the socket) are tasks of that loop, its locks and queues bound to it. A
plain script calling `asyncio.run(agent.start())`, then `asyncio.run(agent.ask(...))`, ran each call on a new
loop: the first loop's end cancelled every background task, the second call went on against a half-dead engine
(`/status` "Embedding queue: 2 pending" for ever), and `aclose` raised a bare "RuntimeError: Event loop is
closed", leaving the home locked for the rest of the process (newcomer24). Now a call from another loop is
refused with `OtherEventLoop`, naming the cause and the two ways that work (one `asyncio.run(main())`, or one
`asyncio.Runner` across the steps), and `aclose` from another loop, once the first has closed, closes what it
can without the drain and lets the home go (decision 538).
"""

from __future__ import annotations

import asyncio
import logging

from klaw.engine.runtime import Engine
from klaw.errors import KlawError
from klaw.home import KlawHome

log = logging.getLogger("klaw.library")

LET_GO_SECONDS = 10.0
"""At most this long closing an engine whose loop has closed: a part waiting on the dead loop is left there."""


class OtherEventLoop(KlawError, RuntimeError):
    """A `Klaw` called on another event loop than the one its `start` ran on (each `asyncio.run` makes a loop of
    its own and closes it at its end): the message says whether that loop has closed, and what to write instead."""


class StartLoop:
    """The loop a `Klaw`'s engine was started on, and the check every call makes against it."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def started(self) -> None:
        self._loop = asyncio.get_running_loop()

    def other(self) -> bool:
        """Whether this call runs on a loop other than the start's (False outside any loop: a plain attribute read)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._loop is not None and running is not self._loop

    def closed(self) -> bool:
        """Whether the start's loop has closed (`asyncio.run` returned): nothing of the engine runs any more."""
        return self._loop is not None and self._loop.is_closed()

    def refuse(self, home: KlawHome) -> None:
        """Raise `OtherEventLoop` when this call runs on another loop than the start's."""
        if not self.other():
            return
        name = f"Klaw({str(home.root)!r})"
        if self.closed():
            raise OtherEventLoop(
                f"{name} was started on an event loop that has closed since: asyncio.run closes its loop when it"
                " returns, and the engine's background work (embedding, summaries, scheduled tasks) stopped with it,"
                " so a script's asyncio.run(agent.start()) then asyncio.run(agent.ask(...)) cannot work. Run the"
                " program in one loop: asyncio.run(main()) with `async with Klaw(...) as agent:` and every await"
                " inside main; or, calling step by step, one asyncio.Runner: `with asyncio.Runner() as runner:`,"
                " then runner.run(agent.start()), runner.run(agent.ask(...)), runner.run(agent.aclose())"
                ' (docs/library.md, "From a plain script"). asyncio.run(agent.aclose()) still closes it and lets'
                " the home go."
            )
        raise OtherEventLoop(
            f"{name} was started on another event loop, which still runs it (another thread's): its engine lives on"
            " that loop, so call it there, e.g. asyncio.run_coroutine_threadsafe(agent.ask(chat, text),"
            " loop).result() from this thread"
        )


async def let_go(engine: Engine, home: KlawHome) -> None:
    """`aclose` from another loop once the start's has closed: the parts closed without a drain (nothing runs on
    a closed loop), those bound to it failing, the home's lock given back; said in a warning."""
    failed = ""
    try:
        async with asyncio.timeout(LET_GO_SECONDS):
            await engine.let_go()
    except Exception as exc:  # a part bound to the closed loop ("Event loop is closed"): expected here
        failed = f" (some parts could not be closed from this loop: {type(exc).__name__}; they go with the process)"
    log.warning(
        "Klaw(%r) was closed from another event loop than the one it was started on, which had closed: what was"
        " left of its engine was closed and the home let go%s. Use one event loop for the whole program"
        ' (docs/library.md, "From a plain script")',
        str(home.root),
        failed,
    )
