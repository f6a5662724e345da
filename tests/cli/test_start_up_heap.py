"""An engine started by klaw's own commands (`klaw engine`, `chat`, `gateway`) leaves what it built at
start to the garbage collector no more, and `klaw bench turn` measures the same (decision 303); a program
using klaw as a library keeps its own collector settings."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.cli.context import start_engine_or_exit
from klaw.config import EngineConfig
from klaw.config_loader import LoadedConfig
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.library import Klaw
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.start_up_heap import YOUNG_THRESHOLD


@pytest.fixture
def collector() -> Iterator[None]:
    """The test process's collector as it was, whatever the test changed."""
    threshold = gc.get_threshold()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def _config(base_url: str) -> EngineConfig:
    return EngineConfig.model_validate(
        {
            "models": {"fake/m": {"baseUrl": base_url, "maxRetries": 0}},
            "routing": {"default": "fake/m"},
            "embedder": {"backend": "fake"},
        }
    )


async def test_an_engine_a_command_starts_freezes_what_start_built(tmp_path: Path, collector: None) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        engine = await start_engine_or_exit(home, LoadedConfig(_config(server.base_url), {}, home.config_file))
        try:
            assert gc.get_freeze_count() > 10_000  # modules, classes, the config: never scanned again
            assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
        finally:
            await engine.shutdown(timeout_seconds=10)


async def test_a_program_using_klaw_keeps_its_own_collector(tmp_path: Path, collector: None) -> None:
    threshold = gc.get_threshold()
    async with FakeOpenAiServer() as server, Klaw(tmp_path / "home", config=_config(server.base_url)) as klaw:
        assert "hello" in await klaw.ask("me", "hello")
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


def test_bench_turn_reports_the_collector_and_runs_as_the_engine_does(tmp_path: Path, collector: None) -> None:
    out = tmp_path / "turn.json"
    args = ["bench", "turn", "--stored", "20", "--turns", "2", "--chats", "2", "--chat-turns", "2", "--out", str(out)]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    figures = json.loads(out.read_text())["results"][0]
    assert figures["gc_frozen_objects"] > 10_000 and figures["gc_ms_per_turn"] >= 0
    assert "the garbage collector" in run.output
