"""A `config=` given to `Klaw` meets an earlier `/rag set` stored in the home's database: the stored value
still wins (as over engine.yaml), start says so in a warning naming it and `/rag reset`, `/rag config`
marks it with how to undo it, and `/rag reset [key]` gives the config's value back (decision 290)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from klaw import Klaw

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


async def test_a_stored_rag_value_over_a_given_config_is_said_and_reset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    async with Klaw(home, config=CONFIG) as agent:
        assert await agent.ask("frank", "/rag set min_similarity 0.6") == "Updated: rag.minSimilarity = 0.6"
        assert (await agent.ask("frank", "/rag off")).startswith("Past conversations off")
    given = {**CONFIG, "rag": {"minSimilarity": 0.2}}
    with caplog.at_level(logging.WARNING, logger="klaw"):
        async with Klaw(home, config=given) as agent:
            warned = " ".join(r.getMessage() for r in caplog.records if r.name == "klaw.library")
            assert "rag.minSimilarity = 0.6 (/rag set)" in warned and "/rag reset" in warned, warned
            config = await agent.ask("frank", "/rag config")
            assert "  rag.minSimilarity: 0.6 (set by command; /rag reset rag.minSimilarity undoes it)" in config
            assert "/rag reset <key> undoes one" in config
            reset = await agent.ask("frank", "/rag reset minSimilarity")
            assert reset == "Reset to the configuration's: rag.minSimilarity = 0.2"
            assert "  rag.minSimilarity: 0.2\n" in await agent.ask("frank", "/rag config")
            assert await agent.ask("frank", "/rag reset") == "Reset to the configuration's: rag.enabled = true"
            assert await agent.ask("frank", "/rag reset") == (
                "No /rag value is set by command: the configuration's values apply (/rag config shows them)."
            )
            assert await agent.ask("frank", "/rag reset colour") == (
                "Invalid key 'colour'. Valid keys: enabled, conversationLimit, exchangeLimitPerConversation,"
                " minSimilarity, maxTokens (engine.yaml's rag names)"
            )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="klaw"):
        async with Klaw(home, config=given) as agent:
            assert "set by command" not in await agent.ask("frank", "/rag config")
    assert not [r for r in caplog.records if r.name == "klaw.library"]
