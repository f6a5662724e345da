"""`/summarizer`, `/embeddings` and `/rag` (docs/decisions/009-carried-over-requirements.md:
SummarizerCommand, EmbeddingsCommand, RagCommand; auto-start from the settings store): answers, validation,
settings that survive a restart and override engine.yaml, workers started accordingly."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.engine.memory_settings import SettingError, parse_rag_value
from tests.engine.harness import CHAT, Harness, running_engine
from tests.memory.summary_helpers import summarizing_reply

ON = {"summarizer": {"enabled": True}}


async def reply(h: Harness, text: str) -> str:
    result = await h.engine.submit(CHAT, text)
    assert result.command_reply is not None
    return result.command_reply


async def test_summarizer_switch_persists_and_decides_the_auto_start(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **ON) as h:
        h.server.default_reply = summarizing_reply
        assert h.engine.summarizer is not None and h.engine.summarizer.running
        await h.engine.summarizer.wait_idle()
        status = await reply(h, "/summarizer")
        assert status.startswith("Summarizer: on (running), model fake/small")
        assert (
            "exchange summarizer: idle; 0 written since the engine started" in status and "segment summarizer" in status
        )
        await h.turn("how do I brew green tea")
        await h.engine.summarizer.wait_idle()
        assert "exchange summarizer: idle; 1 written since the engine started" in await reply(h, "/summarizer status")
        assert "Summaries stored (all time): 1 exchange(s) (0 waiting)" in await reply(h, "/summarizer status")
        assert (await reply(h, "/summarizer off")).startswith("Summarizer off")
        assert not h.engine.summarizer.running
        assert (await reply(h, "/summarizer")).startswith("Summarizer: off (stopped)")
        assert await reply(h, "/summarizer sometimes") == "Usage: /summarizer [on|off|status]"
    async with running_engine(tmp_path, **ON) as h:  # engine.yaml says on; the command said off
        assert h.engine.summarizer is not None and not h.engine.summarizer.running
        await reply(h, "/summarizer on")
        assert h.engine.summarizer.running
    async with running_engine(tmp_path) as h:  # engine.yaml says off (the harness); the command said on
        assert h.engine.summarizer is not None and h.engine.summarizer.running


async def test_embeddings_switch_status_and_rebuild_with_confirmation(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **ON) as h:
        h.server.default_reply = summarizing_reply
        await h.turn("how do I brew green tea at eighty degrees")
        assert h.engine.summarizer is not None
        await h.engine.summarizer.wait_idle()
        await h.engine.embedding_queue.wait_idle()
        status = await reply(h, "/embeddings")
        assert status.startswith("Embedding worker: on (running)") and "- no jobs waiting" in status
        assert "Vectors: 2 messages, 1 summaries" in status  # the question and its echo
        assert (await reply(h, "/embeddings off")).startswith("Embedding worker off")
        await h.turn("and how long should the green tea steep in the pot")
        await h.engine.summarizer.wait_idle()
        stopped = await reply(h, "/embeddings status")
        assert stopped.startswith("Embedding worker: off (stopped)")
        assert "- message: " in stopped and "- summary: 1 pending, 0 failed" in stopped
        ask = await reply(h, "/embeddings rebuild")
        assert "deletes the 1 summary vectors" in ask and "/embeddings rebuild confirm" in ask
        assert (await h.engine.store.summaries.counts()).vectors == 1  # storage's count: nothing happened yet
        done = await reply(h, "/embeddings rebuild confirm")
        assert done.startswith("Summary vectors dropped; 2 summaries queued") and "worker is off" in done
        assert await reply(h, "/embeddings now") == "Usage: /embeddings [on|off|status|rebuild]"
    async with running_engine(tmp_path, **ON) as h:  # still off after a restart
        assert not (await h.engine.embedding_queue.status()).running
        assert await reply(h, "/embeddings on") == "Embedding worker on."
        await h.clock.advance(60)  # a new manual clock starts at the same time: jobs queued later wait
        await h.engine.embedding_queue.wait_idle()
        assert (await h.engine.store.summaries.counts()).vectors == 2  # storage's count of summary vectors
        assert "- no jobs waiting" in await reply(h, "/embeddings")


async def test_embeddings_shows_failed_jobs_per_target_and_on_queues_them_again(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **ON) as h:
        h.server.default_reply = summarizing_reply
        await reply(h, "/embeddings off")
        await h.turn("how do I brew green tea at eighty degrees")
        assert h.engine.summarizer is not None
        await h.engine.summarizer.wait_idle()
        store = h.engine.store  # the embedding queue's jobs, as stored
        jobs = await store.embedding_jobs.due(h.clock.now(), 100)
        assert sorted(job.target for job in jobs) == ["message", "message", "summary"]
        for job in jobs:  # the state the queue leaves after the 32 s retry failed (test_summary_embedding.py)
            await store.embedding_jobs.fail(job.id, "LlmServerError: HTTP 503")
        status = await reply(h, "/embeddings")
        assert "- message: 0 pending, 2 failed (last error: LlmServerError: HTTP 503)" in status
        assert "- summary: 0 pending, 1 failed (last error: LlmServerError: HTTP 503)" in status
        assert "Failed jobs gave up after 6 retries (1–32 s apart); /embeddings on queues them again." in status
        assert await reply(h, "/embeddings on") == "Embedding worker on; 3 failed job(s) queued again."
        await h.engine.embedding_queue.wait_idle()
        assert "- no jobs waiting" in await reply(h, "/embeddings")
        assert (await store.summaries.counts()).vectors == 1 and await store.vectors.count() == 2


async def test_rag_config_set_validation_and_persistence(tmp_path: Path) -> None:
    async with running_engine(tmp_path, rag={"conversationLimit": 4}) as h:
        status = await reply(h, "/rag")
        assert status.startswith("Past conversations: on")
        assert "Up to 4 segment(s) and 2 exchange(s) each, similarity at least 0.35, within 600 tokens" in status
        config = await reply(h, "/rag config")
        assert "  rag.conversationLimit: 4\n" in config and "(set by command)" not in config
        assert await reply(h, "/rag set rag_min_similarity 0.5") == "Updated: rag.minSimilarity = 0.5"
        assert await reply(h, "/rag set conversation_limit 5") == "Updated: rag.conversationLimit = 5"
        assert await reply(h, "/rag set rag_nope 1") == (  # engine.yaml's names only (decision 527)
            "Invalid key 'rag_nope'. Valid keys: conversationLimit, exchangeLimitPerConversation, minSimilarity,"
            " maxTokens (engine.yaml's rag names)"
        )
        # engine.yaml's names, as `klaw config show` prints them, work too
        assert await reply(h, "/rag set minSimilarity 0.5") == "Updated: rag.minSimilarity = 0.5"
        assert await reply(h, "/rag set rag.maxTokens 700") == "Updated: rag.maxTokens = 700"
        assert await reply(h, "/rag set rag_conversation_limit 0") == "Limit must be greater than 0"
        assert await reply(h, "/rag set rag_min_similarity 1.5") == "Similarity must be between 0 and 1"
        assert "Invalid value for exchangeLimitPerConversation: '2.5'" in await reply(
            h, "/rag set rag_exchange_limit_per_conversation 2.5"
        )
        assert await reply(h, "/rag set rag_max_tokens") == "Usage: /rag set <key> <value>"
        assert (
            await reply(h, "/rag off")
            == "Past conversations off: the context holds only this segment (and core memory)."
        )
        assert await reply(h, "/rag maybe") == "Usage: /rag [on|off|config|set <key> <value>|reset [key]]"
    async with running_engine(tmp_path, rag={"conversationLimit": 4}) as h:
        config = await reply(h, "/rag config")
        assert "  rag.enabled: false (set by command; /rag reset" in config
        assert "  rag.conversationLimit: 5 (set by command; /rag reset" in config
        assert "  rag.minSimilarity: 0.5 (set by command; /rag reset" in config
        assert "  rag.exchangeLimitPerConversation: 2\n" in config
        assert "/summarizer" in await reply(h, "/help") and "/rag" in await reply(h, "/help")


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("rag_conversation_limit", "3", ("rag_conversation_limit", 3)),
        ("exchange_limit_per_conversation", "1", ("rag_exchange_limit_per_conversation", 1)),
        ("rag_min_similarity", "0", ("rag_min_similarity", 0.0)),
        ("rag_min_similarity", "1", ("rag_min_similarity", 1.0)),
        ("rag_max_tokens", "200", ("rag_max_tokens", 200)),
    ],
)
def test_rag_values_that_pass(key: str, raw: str, expected: tuple[str, float]) -> None:
    assert parse_rag_value(key, raw) == expected


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("rag_conversation_limit", "-1"),
        ("rag_conversation_limit", "three"),
        ("rag_min_similarity", "-0.1"),
        ("rag_min_similarity", "high"),
        ("rag_max_tokens", "0"),
        ("rag_enabled", "true"),
    ],
)
def test_rag_values_that_fail(key: str, raw: str) -> None:
    with pytest.raises(SettingError):
        parse_rag_value(key, raw)
