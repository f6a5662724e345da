"""A plugin's provider that takes its time (newcomer24 item 6, decision 540): one sleeping 8 s stalled a
program's event loop 8 s as its library Klaw started, one sleeping 40 s held the start 40 s without a word. A
provider runs off the loop now, bounded as a plugin's import is: named after SAY_AFTER_SECONDS, left out as
failed after LIMIT_SECONDS. The plugins are real dist-infos on the path; the model is the fake model server."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest

from klaw import Klaw
from klaw.llm.fake_server import FakeOpenAiServer
from tests.serve_helpers import serve_config
from tests.tools.conftest import install

WAITS_FOR_THE_LOOP = '''
import pathlib, time


def provide(setup):
    """Returns its tool once a coroutine on the program's loop has written `ticked` (at most 20 s)."""
    mark = pathlib.Path(__file__).with_name("ticked")
    deadline = time.monotonic() + 20
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)

    async def patient(text: str) -> str:
        """Answer patiently.

        Args:
            text: what to answer
        """
        return text

    return [patient] if mark.exists() else []
'''

HANGS = """
import pathlib, time


def provide(setup):
    while not pathlib.Path(__file__).with_name("release").exists():  # the test releases it once done
        time.sleep(0.05)
    return []
"""


async def test_a_slow_provider_leaves_the_program_s_loop_free(tmp_path: Path, site: Path) -> None:
    install(site, "patient", "klaw_patient_provider", WAITS_FOR_THE_LOOP, "provide")

    async def tick() -> None:  # the program's own work on its loop while klaw starts
        await asyncio.sleep(0.2)
        (site / "ticked").touch()

    async with FakeOpenAiServer() as model:
        config = serve_config(model.base_url, channels=None, tools={"enabled": ["clock", "patient"]})
        ticking = asyncio.create_task(tick())
        async with Klaw(tmp_path / "home", config=config) as agent:  # before: the loop stood still until 20 s
            rows = {row.name: row for row in await agent.tools("alice")}
        await ticking
    assert rows["patient"].state == "offered", rows.get("patient")


async def test_a_provider_that_hangs_is_named_then_left_out_and_the_start_goes_on(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("klaw.tools.plugin_import.SAY_AFTER_SECONDS", 0.2)  # 5 s and 60 s as shipped
    monkeypatch.setattr("klaw.tools.plugin_import.LIMIT_SECONDS", 0.5)
    install(site, "slowprov", "klaw_hanging_provider", HANGS, "provide")
    safety_net = threading.Timer(20, (site / "release").touch)  # the old code waited for it: released, it fails
    safety_net.start()
    try:
        async with FakeOpenAiServer() as model:
            config = serve_config(model.base_url, channels=None, tools={"enabled": ["clock", "slowprov"]})
            with caplog.at_level(logging.WARNING, "klaw"):
                async with Klaw(tmp_path / "home", config=config) as agent:
                    rows = {row.name: row for row in await agent.tools("alice")}
                    assert "hi" in await agent.ask("alice", "hi")  # the fake model echoes
    finally:
        safety_net.cancel()
        (site / "release").touch()
    assert rows["current_time"].state == "offered"
    assert rows["slowprov"].state == "failed"
    assert rows["slowprov"].reason == (
        "calling klaw_hanging_provider:provide: its provider had not finished after 0.5 s (it hangs?)"
    )
    assert rows["slowprov"].fix.startswith("remove slowprov from tools.enabled (or uninstall klaw_hanging_provider)")
    assert (
        "still waiting for the provider klaw_hanging_provider:provide of tool group 'slowprov'"
        " (klaw_hanging_provider): klaw waits for it up to 0.5 s in all; if its provider hangs, remove slowprov"
        " from tools.enabled to start without it"
    ) in caplog.text
