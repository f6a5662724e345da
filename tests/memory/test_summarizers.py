"""The exchange and segment summarizers (docs/decisions/009-carried-over-requirements.md:
ExchangeSummarizer; the segment summary that replaces its ConversationSummarizer), on a real store and the
fake OpenAI server over HTTP, with a manual clock for idle timeouts and backoff. Tests wait for the state
the workers signal (`wait_until`, `wait_idle`), never by polling."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from klaw.engine.slots import LlmSlots, Priority
from klaw.llm.fake_server import ErrorReply, Reply
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.memory.summaries.prompts import EXCHANGE_INSTRUCTIONS
from klaw.memory.summaries.service import SummarizerService
from klaw.memory.summaries.worker import WorkerState, backoff_seconds
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.store.summaries.records import SUMMARY_TARGET, SummaryKind
from tests.engine.harness import engine_config
from tests.memory.summary_helpers import Turns, summarizing_reply
from tests.memory.summary_rig import Rig, backing_off_after, completed, idle, summary_rig, until
from tests.store.test_read_cache import Statements

SECRET = "my locker code is 31-17-4 under the blue flower pot"


@pytest.fixture
async def rig(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    async with summary_rig(tmp_path, getattr(request, "param", {})) as made:
        yield made


async def test_exchanges_are_summarized_oldest_first_on_the_summarization_model_skipping_the_open_one(
    rig: Rig,
) -> None:
    turns = Turns(rig.store)
    tea = await turns.turn("how do I brew green tea", "steep it at 80 degrees")
    bike = await turns.turn("which oil for a bike chain", "a dry lube")
    opened = await turns.open_turn("and black tea?")
    rig.service.start()
    await idle(rig)
    summaries = [s for s in await rig.store.summaries.in_segment(tea.segment_id) if s.kind is SummaryKind.EXCHANGE]
    assert [(s.exchange_id, s.text) for s in summaries] == [
        (tea.id, "The person asked: how do I brew green tea"),
        (bike.id, "The person asked: which oil for a bike chain"),
    ]
    assert {s.model for s in summaries} == {"fake/large"}
    assert [r.body["model"] for r in rig.summary_requests] == ["large", "large"]
    assert "steep it at 80 degrees" in rig.summary_requests[0].body["messages"][1]["content"]
    assert len(rig.embeddings_queued) == 2
    jobs = await rig.store.embedding_jobs.due(rig.clock.now() + timedelta(days=1), 10)
    assert sorted(j.target_rowid for j in jobs if j.target == SUMMARY_TARGET) == [s.id for s in summaries]

    black = await turns.close(opened, "steep it at 95 degrees")
    rig.service.notify()  # the engine's ingestion does this when the exchange_close record is stored
    await idle(rig)
    assert (await rig.store.summaries.exchange_summary(black.id)) is not None
    status = await rig.service.status()
    assert (status.exchange.completed, status.exchange.failed, status.pending_exchanges) == (3, 0, 0)
    assert status.exchange.state is WorkerState.IDLE and status.model == "fake/large"


@pytest.mark.parametrize("rig", [{"rollingEvery": 2}], indirect=True)
async def test_segment_summary_rolls_forward_and_becomes_final_when_the_segment_closes(rig: Rig) -> None:
    turns = Turns(rig.store)
    first = await turns.turn("plan a trip to Lisbon", "book the hotel in Alfama")
    rig.service.start()
    await idle(rig)
    assert await rig.store.summaries.segment_summary(first.segment_id) is None  # 1 < rollingEvery
    await turns.turn("what about trams in Lisbon", "take tram 28")
    rig.service.notify()
    await idle(rig)
    rolling = await rig.store.summaries.segment_summary(first.segment_id)
    assert rolling is not None and not rolling.final and rolling.exchanges_covered == 2
    assert rolling.text == "The person asked: plan a trip to Lisbon The person asked: what about trams in Lisbon"
    assert (await rig.store.summaries.counts()).vectors == 0 and len(rig.embeddings_queued) == 2

    before = len(rig.summary_requests)
    await turns.new_segment()
    rig.service.notify()
    await idle(rig)
    final = await rig.store.summaries.segment_summary(first.segment_id)
    assert final is not None and final.final and final.text == rolling.text
    assert len(rig.summary_requests) == before  # it already covered everything: no model call
    assert len(rig.embeddings_queued) == 3  # the final summary is queued for embedding

    await turns.turn("new topic entirely", "sure")  # the next segment: 1 exchange, not yet rolled
    rig.service.notify()
    await idle(rig)
    assert (await rig.store.summaries.counts()).segments_final == 1


@pytest.mark.parametrize("rig", [{"batchExchanges": 3, "batchWaitSeconds": 600}], indirect=True)
async def test_chats_waiting_for_their_batch_cost_one_query_a_pass_however_many(rig: Rig) -> None:
    """Which segments are closed is asked once for all the chats waiting for a batch, not once per chat
    (50 chats talking at once made every pass 50 queries), and asked again only once a segment changed."""
    chats = [ChatRef("console", f"chat{n}") for n in range(8)]
    for chat in chats:
        await Turns(rig.store, chat).turn(f"which stain for the fence of {chat.chat_id}", "an oil-based one")
    rig.service.start()
    await idle(rig)
    assert rig.summary_requests == []  # each waits for two more of its segment
    statements = Statements()
    await rig.store.db.run(lambda connection: setattr(connection, "exec_trace", statements))
    rig.service.exchanges.notify()
    await idle(rig)
    assert [sql for sql in statements.sql if "segments" in sql] == []  # nothing changed them since the last pass
    # At most the scan for new exchanges, which reads on a read connection (with each exchange's records,
    # decision 272), so the database thread's connection traced here may run none.
    assert statements.count <= 2, statements.sql

    for chat in chats[:3]:
        await Turns(rig.store, chat).new_segment()  # a closed segment's exchanges wait no longer
    rig.service.notify()
    await idle(rig)
    sent = [r.body["messages"][1]["content"] for r in rig.summary_requests if "Summary so far" not in str(r.body)]
    assert sorted(text.split("fence of ")[1].split("\n")[0] for text in sent) == ["chat0", "chat1", "chat2"]


async def test_a_closed_segment_is_folded_to_its_end_in_one_final_summary(rig: Rig) -> None:
    turns = Turns(rig.store)
    one = await turns.turn("question about cheese", "brie")
    await turns.turn("question about wine", "port")
    await turns.new_segment()
    rig.service.start()
    await idle(rig)
    final = await rig.store.summaries.segment_summary(one.segment_id)
    assert final is not None and final.final and final.exchanges_covered == 2
    assert "cheese" in final.text and "wine" in final.text


async def test_a_failing_model_backs_off_and_retries_later_without_losing_the_exchange(rig: Rig) -> None:
    rig.server.reply_error(500)
    rig.server.reply_error(503)
    exchange = await Turns(rig.store).turn(SECRET, "noted")
    rig.service.start()
    exchanges = rig.service.exchanges
    status = await until(exchanges, lambda s: s.state is WorkerState.BACKING_OFF, "backing off")
    assert status.failed == 1 and status.last_error is not None and status.last_error.startswith("LlmServerError")
    assert status.retry_at == rig.clock.now() + timedelta(seconds=1)
    await rig.clock.advance(1)
    status = await until(exchanges, backing_off_after(2), "second failure")
    assert status.retry_at == rig.clock.now() + timedelta(seconds=2)
    await rig.clock.advance(2)
    await until(exchanges, completed(1), "summary")
    assert await rig.store.summaries.exchange_summary(exchange.id) is not None
    await idle(rig)
    assert rig.service.exchanges.status().state is WorkerState.IDLE
    assert [backoff_seconds(n) for n in (1, 2, 3, 9, 20)] == [1, 2, 4, 256, 300]


async def test_an_exchange_the_model_keeps_rejecting_is_kept_verbatim_and_the_fold_goes_on(rig: Rig) -> None:
    def rejecting(body: Mapping[str, Any]) -> Reply:
        exchange = body["messages"][0]["content"] == EXCHANGE_INSTRUCTIONS  # not the fold that quotes it
        rejected = exchange and "a question the model rejects" in json.dumps(body)
        return ErrorReply(400, "prompt too long") if rejected else summarizing_reply(body)

    rig.server.default_reply = rejecting
    turns = Turns(rig.store)
    rejected = await turns.turn("a question the model rejects", "an answer")
    fine = await turns.turn("a question about cheese", "brie")
    await turns.new_segment()
    rig.service.start()
    # Each rejection sets the exchange back: the next one is summarized meanwhile.
    await until(rig.service.exchanges, backing_off_after(1), "backing off after the first rejection")
    await rig.clock.advance(1)
    await until(rig.service.exchanges, completed(1), "the next exchange, the rejected one set back")
    assert await rig.store.summaries.exchange_summary(fine.id) is not None
    status = await until(rig.service.exchanges, backing_off_after(2), "backing off after the second rejection")
    assert status.retry_at is not None
    await rig.clock.advance((status.retry_at - rig.clock.now()).total_seconds())
    await idle(rig)
    status = rig.service.exchanges.status()
    assert (status.completed, status.failed, status.given_up) == (2, 3, 1)
    assert status.last_error is not None and status.last_error.startswith("LlmBadRequestError")
    kept = await rig.store.summaries.exchange_summary(rejected.id)
    assert kept is not None and kept.model == "klaw/verbatim"
    assert kept.text == 'The person wrote "a question the model rejects"; the assistant replied "an answer".'
    final = await rig.store.summaries.segment_summary(fine.segment_id)
    assert final is not None and final.final and final.exchanges_covered == 2


async def test_an_empty_answer_is_final_at_once_and_no_later_start_asks_again(rig: Rig, tmp_path: Path) -> None:
    """Spec 002's prompt: what was asked, what was done, the outcome. An empty answer is the model's
    final word on the exchange (decision 250): no backoff, no second request, the exchange's own words
    kept as its summary, and a summarizer started again on the same home asks nothing."""
    turns = Turns(rig.store)
    opened = await turns.open_turn("what time is it in Lisbon")
    calls = [{"id": "c1", "name": "current_time", "arguments": '{"timezone": "Europe/Lisbon"}'}]
    await rig.store.messages.append(
        MessageRecord(
            turns.chat,
            Role.ASSISTANT,
            "",
            MessageType.TOOL_CALL,
            created_at=turns.now(),
            metadata={"tool_calls": calls},
        )
    )
    result = {"tool_call_id": "c1", "name": "current_time", "is_error": False}
    await rig.store.messages.append(
        MessageRecord(turns.chat, Role.TOOL, "10:04", MessageType.TOOL_RESULT, created_at=turns.now(), metadata=result)
    )
    lisbon = await turns.close(opened, "It is 10:04 in Lisbon.")
    await turns.new_segment()
    rig.server.reply_text("  ")  # the exchange
    rig.server.reply_text("")  # the segment fold
    rig.service.start()
    await idle(rig)
    [request, _fold] = rig.summary_requests
    asked = request.body["messages"][1]["content"]
    assert "what time is it in Lisbon" in asked and "Tools the assistant used: current_time" in asked
    assert "It is 10:04 in Lisbon." in asked
    status = rig.service.exchanges.status()
    assert (status.completed, status.failed, status.given_up, status.state) == (1, 1, 1, WorkerState.IDLE)
    assert status.last_error is not None and status.last_error.startswith("EmptySummaryError")
    kept = await rig.store.summaries.exchange_summary(lisbon.id)
    assert kept is not None and kept.model == "klaw/verbatim"
    assert kept.text == (
        'The person wrote "what time is it in Lisbon"; the assistant used current_time;'
        ' the assistant replied "It is 10:04 in Lisbon.".'
    )
    segment = await rig.store.summaries.segment_summary(lisbon.segment_id)
    assert segment is not None and segment.final and segment.model == "klaw/verbatim"
    assert segment.text == kept.text and rig.service.segments.status().given_up == 1

    await rig.service.aclose()
    again = SummarizerService(
        Ingestion(ConversationLog(tmp_path / "conversations"), rig.store),
        lambda: rig.router.for_task("summarization"),
        lambda: rig.slots.hold(Priority.BACKGROUND),
        rig.clock,
        engine_config(rig.server.base_url).summarizer,
    )
    again.start()
    try:
        async with asyncio.timeout(10):
            await again.wait_idle()
    finally:
        await again.aclose()
    assert len(rig.summary_requests) == 2
    assert (again.exchanges.status().given_up, again.segments.status().given_up) == (0, 0)


async def test_failed_turns_are_not_summarized_and_idle_workers_wake_on_their_timeout(rig: Rig) -> None:
    turns = Turns(rig.store)
    rig.service.start()
    await idle(rig)
    await turns.turn("this turn failed", None, ExchangeStatus.FAILED)
    done = await turns.turn("a question about bread", "sourdough")  # stored, but nobody signals
    await rig.clock.advance(30)  # summarizer.idleSeconds
    await until(rig.service.exchanges, completed(1), "summary after the idle timeout")
    assert await rig.store.summaries.exchange_summary(done.id) is not None
    await idle(rig)
    assert len(rig.summary_requests) == 1


async def test_summaries_are_never_logged_with_content(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    rig.server.reply_error(500)
    turns = Turns(rig.store)
    await turns.turn(SECRET, f"I will remember that {SECRET}")
    await turns.new_segment()
    rig.service.start()
    await until(rig.service.exchanges, backing_off_after(1), "backing off")
    await rig.clock.advance(1)
    await idle(rig)
    assert (await rig.store.summaries.counts()).segments_final == 1
    assert "31-17-4" not in caplog.text and "flower" not in caplog.text
    assert "LlmServerError" in caplog.text


async def test_a_background_slot_waits_behind_interactive_and_subagent_calls() -> None:
    slots = LlmSlots(1)
    order: list[str] = []

    async def use(priority: Priority, name: str) -> None:
        async with slots.hold(priority):
            order.append(name)

    async with slots.hold(Priority.INTERACTIVE):
        waiting = [
            asyncio.create_task(use(Priority.BACKGROUND, "summary")),
            asyncio.create_task(use(Priority.SUBAGENT, "task")),
            asyncio.create_task(use(Priority.INTERACTIVE, "turn")),
        ]
        await asyncio.sleep(0)
        assert slots.queue_depth == 3
    await asyncio.gather(*waiting)
    assert order == ["turn", "task", "summary"]


async def test_an_exchange_forgotten_while_the_model_writes_leaves_no_summary(rig: Rig) -> None:
    exchange = await Turns(rig.store).turn(SECRET, "noted")

    async def forget_meanwhile() -> None:
        def delete(connection: apsw.Connection) -> None:
            with connection:
                connection.execute("DELETE FROM exchanges WHERE id = ?", (exchange.id,))

        await rig.store.db.run(delete)

    rig.server.reply_text(f"The person shared: {SECRET}", before=forget_meanwhile)
    rig.service.start()
    await idle(rig)
    assert (await rig.store.summaries.counts()).exchanges == 0
    status = rig.service.exchanges.status()
    assert (status.completed, status.failed) == (0, 0)
