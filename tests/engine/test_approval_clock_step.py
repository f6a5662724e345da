"""The time left on a question shown again (the `approvals` query a reloaded web page asks) is counted on
the clock its timeout runs on, not the wall clock: an engine on the system's clock, whose wall clock is
stepped (NTP, a VM resumed, `date -s`) while a question waits, still says the minutes really left."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from klaw.engine.clock import SystemClock
from klaw.engine.frames import AckFrame, HelloFrame, InboundFrame, OutboundFrame, QueryFrame, ResultFrame
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import engine_config

TIMEOUT = 300.0
QUESTION_ID = re.compile(r"/approve ([0-9a-f]{4}) or /deny \1")
LEFT = re.compile(r"no answer in the (?:(\d+) minutes? ?)?(?:(\d+) seconds?)? left means no")


class SteppedWallClock(SystemClock):
    """The system's clock, whose wall time a test steps as NTP would; its sleeps run on as before."""

    step = timedelta(0)

    def now(self) -> datetime:
        return super().now() + self.step


async def test_a_stepped_wall_clock_leaves_the_time_left_as_it_is() -> None:
    """adversary16: the time left came from the wall clock, the timeout from asyncio's monotonic sleep;
    the wall clock stepped back an hour, a question with 5 minutes left said "64 minutes 59 seconds"
    (and stepped forward, "1 second")."""
    clock = SteppedWallClock()
    with short_socket_dir() as root:
        home = KlawHome(root / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            server.reply_tool_calls([("file_write", {"path": "kept.txt", "content": "kept"})])
            server.reply_text("Not written.")
            settings = {"approval": ["file_write"], "approvalTimeoutSeconds": TIMEOUT}
            config = engine_config(server.base_url, tools=settings, processing={"debounceMs": 0})
            engine = await Engine.start(home, config, clock=clock)
            gateway = await GatewayClient.connect(home.socket_path)
            try:
                await gateway.send(HelloFrame(channels=["web"]))
                await gateway.send(InboundFrame(id="m1", channel="web", chat_id="main", text="write kept.txt"))
                while not isinstance(asked := await gateway.recv(), OutboundFrame):
                    assert asked == AckFrame(id="m1"), asked
                found = QUESTION_ID.search(asked.text)
                assert found is not None, asked.text

                for step in (timedelta(hours=-1), timedelta(hours=1)):
                    clock.step = step
                    query = QueryFrame(id=f"q{step}", query="approvals", params={"channel": "web", "chat_id": "main"})
                    await gateway.send(query)
                    answer = await gateway.recv()
                    assert isinstance(answer, ResultFrame), answer
                    [shown] = answer.data["approvals"]
                    left = LEFT.search(shown["text"])
                    assert left is not None, shown["text"]
                    minutes, seconds = (int(part or 0) for part in left.groups())
                    # The wall clock's hour is not counted: never more than the timeout, nor all but gone.
                    assert 60 <= 60 * minutes + seconds <= TIMEOUT, (step, shown["text"])
            finally:
                await gateway.aclose()
                await engine.shutdown(timeout_seconds=5)
