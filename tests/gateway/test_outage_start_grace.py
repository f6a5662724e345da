"""newcomer9: a gateway started just after `klaw engine` warned "the engine is not running…", then "WARNING
… reached the engine after 0.7 s": two lines of no news. At the start, the engine gets a grace of a few
seconds: a miss within it is said at INFO, and so is its end; past it, the warning comes as before. The
gateway link's outage, driven as the link drives it, on a clock the test moves."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from klaw.engine.clock import ManualClock
from klaw.gateway.outage import START_GRACE_SECONDS, EngineOutage


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_an_engine_found_within_the_start_grace_is_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="klaw.gateway.link")
    clock = ManualClock()
    outage = EngineOutage(clock, Path("/tmp/home/engine.sock"))
    outage.unreachable(FileNotFoundError(), ever_connected=False)
    await clock.advance(0.7)
    outage.unreachable(ConnectionRefusedError(), ever_connected=False)
    outage.reached(0, first=True)
    assert warnings(caplog) == []
    said = caplog.text
    assert "the engine is not running" in said and "reached the engine after 0.7 s" in said  # at INFO


async def test_an_engine_still_missing_after_the_grace_is_warned_of_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="klaw.gateway.link")
    clock = ManualClock()
    outage = EngineOutage(clock, Path("/tmp/home/engine.sock"))
    for _ in range(5):
        outage.unreachable(FileNotFoundError(), ever_connected=False)
        await clock.advance(START_GRACE_SECONDS / 2)
    outage.reached(2, first=True)
    said = warnings(caplog)
    assert len(said) == 2, said
    assert said[0].startswith("the engine is not running (nothing answers on /tmp/home/engine.sock)")
    assert said[1].startswith("reached the engine after ") and "2 buffered message(s)" in said[1]
