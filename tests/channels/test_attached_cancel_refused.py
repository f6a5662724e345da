"""review54 (decision 506): an attached `klaw chat`'s Ctrl-C asks the engine's `cancel_turn` query (decision 496);
an engine whose cancel failed answered "the engine could not answer this query (see its log)", and the terminal
said "the running engine cannot cancel a turn from an attached terminal (restart it to update it)": words that
sent the person to restart an engine that was up to date. Now only an engine that does not know the query is
called older. The whole stack: fake OpenAI server, engine on its socket, gateway, the attached console."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from rich.console import Console

from klaw.channels.console_attached import OLDER_ENGINE, AttachedConsole
from tests.channels.stack import running_stack


async def test_a_cancel_the_engine_could_not_make_is_not_called_an_older_engines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from klaw.engine import turn_cancel

    async def failing(processor: Any, chat: Any) -> bool:
        raise RuntimeError("the store failed as the turn was stopped")

    monkeypatch.setattr(turn_cancel, "cancel_turn", failing)
    consoles: list[AttachedConsole] = []

    def channels(home: Any, loaded: Any, server: Any) -> list[AttachedConsole]:
        consoles.append(AttachedConsole(Console(file=io.StringIO()), "local", "stand-in", 30))
        return consoles

    async with running_stack(channels):
        waiting = asyncio.create_task(asyncio.sleep(60))  # the terminal's wait for the reply
        await consoles[0]._ask_to_cancel(waiting)
        await asyncio.gather(waiting, return_exceptions=True)
        assert waiting.cancelled()  # the terminal leaves, the engine goes on, as when it cannot be asked
    said = " ".join(capsys.readouterr().err.split())
    assert "Could not cancel the turn: the engine could not answer this query (see its log); leaving." in said, said
    assert OLDER_ENGINE not in said
