"""`klaw bench turn` end to end on a small chat: each timed turn is broken into its phases from the
timings the engine records on every turn, and the figures reach the screen and the JSON file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from klaw.bench import turn_bench
from klaw.bench.corpus import BENCH_START
from klaw.bench.stats import Latency
from klaw.bench.summary_model import wire_reply
from klaw.bench.turn_bench import measure_turns, phase_table
from klaw.bench.turn_fill import BENCH_VERSION, TurnFill, questions
from klaw.cli.app import app
from klaw.config import ModelConfig
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient
from klaw.memory.summaries.prompts import Transcript, batch_prompt, numbered_answers
from klaw.store.records import ChatRef, ExchangeStatus, Role

TURN_PHASES = ["accept", "exchange", "context", "slot", "model", "reply"]
CONTEXT_LAYERS = [
    "session",
    "system_prompt",
    "core_memory",
    "summary",
    "skills",
    "past_conversations",
    "window",
    "auto_rag",
]
AUTO_RAG_PARTS = ["query_embedding", "vector", "full_text", "ranking", "ranking.neighbours"]


async def test_every_timed_turn_is_broken_into_its_phases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    filled: dict[str, object] = {}
    fill, turn = turn_bench._fill, turn_bench._ReplyWaiter.turn
    asked: list[str] = []

    async def observed_fill(engine: Engine, chat: ChatRef, stored: int, progress: object) -> None:
        await fill(engine, chat, stored, None)
        filled.update(await _chat_state(engine, chat))

    async def observed_turn(self: object, engine: Engine, chat: ChatRef, text: str) -> Outbound:
        asked.extend([text] if chat.chat_id == "main" else [])
        return await turn(self, engine, chat, text)  # type: ignore[arg-type]

    monkeypatch.setattr(turn_bench, "_fill", observed_fill)
    monkeypatch.setattr(turn_bench._ReplyWaiter, "turn", observed_turn)
    result = await measure_turns(tmp_path / "home", stored=60, turns=3, concurrent_chats=2, turns_per_chat=1)

    # The fill wrote the chat as turns leave it (decision 434): an exchange a question and its reply, each
    # summarized, the segment's rolling summary, nothing left for the summarizers or to deliver.
    assert filled == {
        "exchanges": 30,
        "completed": 30,
        "user messages an exchange": {1},
        "said an exchange": {2},
        "pending summaries": 0,
        "exchange summaries": 30,
        "segment summary covers": 30,
        "undelivered": 0,
        "message vectors": 60,  # each stored message's, as the embedding queue leaves them (decision 493)
    }
    assert len(set(asked)) == 3 and asked == questions(3)  # varied, and the same on every run
    assert result.bench_version == BENCH_VERSION == 3
    assert result.turn.count == 3
    assert all(name in result.phases for name in TURN_PHASES)
    context = [name.removeprefix("context.") for name in result.phases if name.startswith("context.")]
    assert [name for name in context if "." not in name] == CONTEXT_LAYERS
    # auto-RAG's parts (decision 404): where its time went, each side and the ranking with its neighbours' read
    assert set(AUTO_RAG_PARTS) <= {name.removeprefix("auto_rag.") for name in context if name.startswith("auto_rag.")}
    assert all(latency.count == 3 and latency.p50_ms >= 0 for latency in result.phases.values())
    assert result.phases["context"].p50_ms > 0 and result.phases["model"].p50_ms > 0
    assert result.background_model_calls_per_turn >= 0
    assert result.embedder == "fake" and result.embedded_texts_per_turn >= 2  # at least each message and reply
    # the many-chats phase's CPU: the engine's process, and the fake model's own process apart
    assert result.cpu_ms_per_turn > 0 and result.model_cpu_ms_per_turn > 0
    assert 0 < result.loop_cpu_ms_per_turn <= result.cpu_ms_per_turn


async def _chat_state(engine: Engine, chat: ChatRef) -> dict[str, object]:
    """What the bench's chat holds, read through the store as the engine reads it."""
    store = engine.store
    segment = await store.segments.current(chat)
    exchanges = await store.exchanges.for_segment(segment.id)
    held = [await store.history.exchange_messages(e.id) or [] for e in exchanges]
    rolling = await store.summaries.segment_summary(segment.id)
    return {
        "exchanges": len(exchanges),
        "completed": sum(e.status is ExchangeStatus.COMPLETED for e in exchanges),
        "user messages an exchange": {sum(m.record.role is Role.USER for m in messages) for messages in held},
        "said an exchange": {sum(m.is_conversation for m in messages) for messages in held},
        "pending summaries": await store.summaries.pending_exchanges(),
        "exchange summaries": sum([await store.summaries.exchange_summary(e.id) is not None for e in exchanges]),
        "segment summary covers": None if rolling is None else rolling.exchanges_covered,
        "undelivered": len(await store.exchanges.undelivered()),
        "message vectors": await store.vectors.count(),
    }


async def test_the_fill_stores_each_messages_vector_and_the_turns_find_hits_by_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision 493: the fill stored no message vectors, so the vector side scanned nothing and the bench left
    out the scan a real chat of that size pays. Now every filled message has the vector the embedding queue
    would have stored (the engine's embedder's, of its text), and the timed turns place hits found by it."""
    found: list[tuple[int, int]] = []
    fill = turn_bench._fill

    async def observed_fill(engine: Engine, chat: ChatRef, stored: int, progress: object) -> None:
        await fill(engine, chat, stored, None)
        assert engine.embedder is not None
        segment = await engine.store.segments.current(chat)
        said = [m for m in await engine.store.messages.window(segment.id, 400) if m.is_conversation]
        assert len(said) == stored == await engine.store.vectors.count()
        for message in said[:: len(said) // 5]:  # its own text's vector finds it first
            vector = (await engine.embedder.embed([message.content]))[0]
            hits = await engine.store.search.nearest(chat, vector, limit=1, segment_id=segment.id)
            found.append((message.rowid, hits[0].message.rowid))

    monkeypatch.setattr(turn_bench, "_fill", observed_fill)
    result = await measure_turns(tmp_path / "home", stored=300, turns=6, concurrent_chats=2, turns_per_chat=1)

    assert len(found) >= 5 and all(wanted == got for wanted, got in found)
    assert result.stored_vectors == 300
    assert result.vector_hits_per_turn > 0  # the vector side ran over the filled chat and its hits were placed
    assert result.phases["context.auto_rag.vector"].count == 6


def test_the_questions_vary_and_are_drawn_from_the_fills_vocabulary() -> None:
    """A repeated question made its words common after ~167 turns, so the common-word filter excluded
    nothing (decision 433); the bench's questions now vary, in the words the stored chat uses."""
    asked = questions(200)
    fill = TurnFill(ChatRef("bench", "main"), BENCH_START, 1)
    records, _ = fill.batch(2000)
    vocabulary = {word for record in records if record.is_conversation for word in record.content.split()}
    words = [word.rstrip("?") for question in asked for word in question.split()]
    assert len(set(asked)) == 200 and asked == questions(200)
    assert len(set(words)) > 500 and sum(word in vocabulary for word in words) > 0.8 * len(words)


def test_an_odd_fill_ends_with_a_turn_that_failed() -> None:
    fill = TurnFill(ChatRef("bench", "main"), BENCH_START, 7)
    records, replies = fill.batch(5)
    kinds = [r.type.value if r.is_control else r.role.value for r in records]
    turn = ["user", "exchange_open", "assistant", "exchange_close", "exchange_summary"]
    assert kinds == [*turn, *turn, "user", "exchange_open", "exchange_close", "segment_summary"]
    assert len(replies) == 2 and fill.written == 5 and fill.exchanges == 3
    assert [(r.metadata or {}).get("exchange") for r in records if r.type.value == "exchange_open"] == [7, 8, 9]
    assert (records[-2].metadata or {})["status"] == "failed"


async def test_the_bench_model_answers_a_summary_batch_with_a_numbered_line_per_exchange() -> None:
    """The bench's stand-in model follows the batch prompt as a real one does, so the summarizer does not
    ask every exchange of a batch again alone (which an echo made it do: 1.29 background calls a turn)."""
    transcripts = [Transcript(f"question {n} about the garden", (), f"answer {n}") for n in range(1, 5)]
    async with FakeOpenAiServer(default_reply=wire_reply) as server:
        client = OpenAiChatClient("fake/bench", ModelConfig(base_url=server.base_url, max_retries=0))
        try:
            batch = await client.complete(batch_prompt(transcripts, 3000))
            turn = await client.complete([ChatMessage.user("hello there")])
        finally:
            await client.aclose()
    answers = numbered_answers(batch.content, len(transcripts))
    assert sorted(answers) == [1, 2, 3, 4]
    assert all(f"question {n}" in answers[n] for n in answers)
    assert turn.content == "echo: hello there"


def test_the_command_prints_the_phases_and_writes_them_as_json(tmp_path: Path) -> None:
    out = tmp_path / "turn.json"
    args = ["bench", "turn", "--stored", "40", "--turns", "2", "--chats", "2", "--chat-turns", "3", "--out", str(out)]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert "turn phases at 40 stored messages" in run.output and "auto_rag" in run.output
    assert "CPU per turn" in run.output and "in its own process" in run.output and "bench version 3" in run.output
    figures = json.loads(out.read_text())["results"][0]
    assert figures["stored_messages"] == 40 and figures["bench_version"] == 3 and figures["stored_vectors"] == 40
    assert set(TURN_PHASES) <= set(figures["phases"])
    assert figures["phases"]["context.window"]["count"] == 2
    assert figures["concurrent_turns"] == 2 * 3 and figures["cpu_ms_per_turn"] > 0
    # the engine ran on uvloop, as `klaw engine` and `klaw serve` run it (decision 220)
    assert figures["event_loop"] == "uvloop" and "its event loop, uvloop" in run.output


def test_the_command_names_the_embedders_it_takes() -> None:
    run = CliRunner().invoke(app, ["bench", "turn", "--stored", "40", "--embedder", "word2vec"])
    assert run.exit_code == 2
    assert "'word2vec' is not one of fake, minilm" in run.output and "Traceback" not in run.output


def test_the_phase_table_draws_each_phase_on_one_scale() -> None:
    phases = {
        "accept": Latency(2.0, 4.0, 10),
        "context": Latency(8.0, 16.0, 10),
        "context.auto_rag": Latency(6.0, 12.0, 10),
        "slot": Latency(float("nan"), float("nan"), 0),  # no turn waited: no bar, no error
    }
    console = Console(width=120, record=True, color_system=None)
    console.print(phase_table(40, phases, width=16))
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 3}
    assert "(0–16 ms)" in text
    assert rows["accept"].count("█") == 2 and rows["accept"].count("░") == 2
    assert rows["context"].count("█") == 8 and rows["context"].count("░") == 8
    assert rows["auto_rag"].count("█") == 6 and rows["auto_rag"].count("░") == 6
    assert "█" not in rows["slot"] and "nan" in rows["slot"]


def test_one_wild_p95_does_not_flatten_the_other_bars() -> None:
    phases = {"model": Latency(4.0, 6.0, 10), "reply": Latency(3.0, 900.0, 10)}
    console = Console(width=120, record=True, color_system=None)
    console.print(phase_table(40, phases, width=16))
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 3}
    assert "(0–8 ms)" in text  # twice the largest p50, not 900
    assert rows["model"].count("█") == 8 and rows["model"].count("░") == 4
    assert rows["reply"].count("█") == 6 and rows["reply"].count("░") == 9 and rows["reply"].count("›") == 1
