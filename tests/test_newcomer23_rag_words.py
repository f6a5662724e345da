"""`/rag set foo 1` and `/help rag` as newcomer23 typed them, through the library (decision 527).

The refusal listed the stored keys first ("Valid keys: rag_conversation_limit, … (or engine.yaml's names:
…)"): a person knows engine.yaml's names (`klaw config show` prints them), so only those are listed.
`/help rag` listed every command, its argument ignored: now it gives /rag's line and its keys.
"""

from __future__ import annotations

from pathlib import Path

from klaw import Klaw

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


async def test_rag_refusals_name_engine_yamls_keys_and_help_rag_is_rags_help(tmp_path: Path) -> None:
    async with Klaw(tmp_path / "home", config=CONFIG) as agent:
        refused = await agent.ask("me", "/rag set foo 1")
        assert refused == (
            "Invalid key 'foo'. Valid keys: conversationLimit, exchangeLimitPerConversation, minSimilarity,"
            " maxTokens (engine.yaml's rag names)"
        )
        assert "rag_" not in refused
        assert await agent.ask("me", "/rag set minSimilarity x") == (
            "Invalid value for minSimilarity: 'x' is not a number from 0 to 1"
        )
        helped = await agent.ask("me", "/help rag")
        assert helped.startswith("/rag — Past conversations in the context: /rag [on|off|config|set"), helped
        assert "conversationLimit, exchangeLimitPerConversation, minSimilarity, maxTokens" in helped
        assert "/new" not in helped and "Commands:" not in helped  # not the whole list
        assert await agent.ask("me", "/help /rag") == helped
        assert (await agent.ask("me", "/help")).startswith("Commands:\n/new")
        unknown = await agent.ask("me", "/help frob")
        assert unknown.startswith("No command /frob. Commands:\n/new"), unknown
