"""Decision 500: an engine started with a model whose contextBudget the system prompt and its tools fill says so
in its log at start, with the figures and the fix (klaw config check refuses the file with the same words); a
model with room says nothing. In process, with the fake OpenAI server as the model."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.engine.harness import running_engine


async def test_the_start_names_a_budget_with_no_room_for_a_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cramped = {"fake/small": {"contextBudget": 700, "maxRetries": 0}}
    with caplog.at_level(logging.WARNING, logger="klaw.engine.budget_room"):
        async with running_engine(tmp_path / "a", models=cramped, tools={"enabled": ["clock", "files", "web"]}):
            pass
    said = [r.getMessage() for r in caplog.records if r.name == "klaw.engine.budget_room"]
    assert len(said) == 1, said
    assert said[0].startswith("context budget: models.fake/small.contextBudget = 700 leaves no room"), said
    assert "Raise models.fake/small.contextBudget to at least" in said[0], said

    caplog.clear()
    roomy = {"fake/small": {"contextBudget": 8000, "maxRetries": 0}}
    with caplog.at_level(logging.WARNING, logger="klaw.engine.budget_room"):
        async with running_engine(tmp_path / "b", models=roomy, tools={"enabled": ["clock", "files", "web"]}):
            pass
    assert not [r for r in caplog.records if r.name == "klaw.engine.budget_room"]
