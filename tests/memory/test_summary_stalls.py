"""A summary request that keeps timing out (a model slower on it than its `timeoutSeconds`) holds up
no other exchange and is given up after `MAX_TIMEOUTS` while the model answers others, kept verbatim
like an empty answer; a model that times out on everything is waited for, not given up item by item
(docs/decisions/261-a-summary-that-times-out-stops-no-other.md). On a real store and the fake OpenAI
server over HTTP: the held request is a reply that never comes, so the client's own timeout fires;
the backoff runs on the manual clock, moved when the worker says it is backing off."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from klaw.llm.fake_server import HangReply, Reply
from klaw.memory.summaries.prompts import EXCHANGE_INSTRUCTIONS, SEGMENT_INSTRUCTIONS
from klaw.memory.summaries.worker import MAX_TIMEOUTS, BackgroundWorker, WorkerState, WorkerStatus
from klaw.store.records import ChatRef
from tests.memory.summary_helpers import Turns, summarizing_reply
from tests.memory.summary_rig import Rig, idle, summary_rig, until

BOB = ChatRef("console", "bob")
SLOW = "plan the whole trip to Patagonia"


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    # Each exchange asked alone, as in the trial (KLAW__SUMMARIZER__BATCHEXCHANGES=1); a held request
    # costs the test `timeoutSeconds` of real time, short here, long enough for a loaded machine's answers.
    async with summary_rig(tmp_path, {"batchExchanges": 1}, model={"timeoutSeconds": 1.5}) as made:
        yield made


def asks_about(body: Mapping[str, Any], words: str, instructions: str = EXCHANGE_INSTRUCTIONS) -> bool:
    """A summary request of the kind `instructions` say (an exchange's own, unless told) about `words`."""
    return body["messages"][0]["content"] == instructions and words in json.dumps(body)


async def through_backoffs(
    rig: Rig, done: Callable[[WorkerStatus], bool], what: str, worker: BackgroundWorker | None = None
) -> WorkerStatus:
    """The worker's status (the exchange summarizer's unless told) once `done`, moving the manual clock
    to each retry meanwhile."""
    worker = worker or rig.service.exchanges
    now = worker.status()
    failed = now.failed - 1 if now.state is WorkerState.BACKING_OFF else now.failed  # backing off already: move on

    def done_or_failed_again(status: WorkerStatus) -> bool:
        return done(status) or (status.state is WorkerState.BACKING_OFF and status.failed > failed)

    for _ in range(12):
        status = await until(worker, done_or_failed_again, what)
        if done(status):
            return status
        assert status.retry_at is not None
        failed = status.failed
        await rig.clock.advance((status.retry_at - rig.clock.now()).total_seconds())
    raise AssertionError(f"still not {what} after 12 backoffs ({worker.status()})")


async def test_an_exchange_that_keeps_timing_out_holds_up_no_other_and_is_kept_verbatim(rig: Rig) -> None:
    rig.server.default_reply = lambda body: HangReply() if asks_about(body, SLOW) else summarizing_reply(body)
    alice = Turns(rig.store)
    slow = await alice.turn(SLOW, "here is a plan")
    later = await alice.turn("which boots for the glacier walk", "waterproof ones")
    other_chat = await Turns(rig.store, BOB).turn("how do I descale a kettle", "vinegar and water")
    rig.service.start()
    status = await through_backoffs(rig, lambda s: s.given_up == 1, "the slow exchange given up")
    await idle(rig)

    for exchange in (later, other_chat):
        summary = await rig.store.summaries.exchange_summary(exchange.id)
        assert summary is not None and summary.model == "fake/large"
    kept = await rig.store.summaries.exchange_summary(slow.id)
    assert kept is not None and kept.model == "klaw/verbatim"
    assert kept.text == f'The person wrote "{SLOW}"; the assistant replied "here is a plan".'
    assert len([r for r in rig.summary_requests if asks_about(r.body, SLOW)]) == MAX_TIMEOUTS
    assert status.last_error is not None and status.last_error.startswith("LlmTimeoutError")
    assert (rig.service.exchanges.status().completed, await rig.service.exchanges.pending()) == (3, 0)


async def test_a_model_that_times_out_on_everything_is_waited_for_not_given_up(rig: Rig) -> None:
    answering = False

    def reply(body: Mapping[str, Any]) -> Reply:
        return summarizing_reply(body) if answering else HangReply()

    rig.server.default_reply = reply
    exchange = await Turns(rig.store).turn("which boots for the glacier walk", "waterproof ones")
    rig.service.start()
    status = await through_backoffs(rig, lambda s: s.failed == MAX_TIMEOUTS + 1, "timed out more than the limit")
    assert status.given_up == 0 and await rig.store.summaries.exchange_summary(exchange.id) is None

    answering = True  # the model is back, or no longer overloaded
    await through_backoffs(rig, lambda s: s.completed == 1, "summarized once the model answers")
    summary = await rig.store.summaries.exchange_summary(exchange.id)
    assert summary is not None and summary.model == "fake/large"
    assert rig.service.exchanges.status().given_up == 0


async def test_a_segment_fold_that_keeps_timing_out_holds_up_no_other_chats_fold(rig: Rig) -> None:
    def reply(body: Mapping[str, Any]) -> Reply:
        return HangReply() if asks_about(body, SLOW, SEGMENT_INSTRUCTIONS) else summarizing_reply(body)

    rig.server.default_reply = reply
    alice, bob = Turns(rig.store), Turns(rig.store, BOB)
    slow = await alice.turn(SLOW, "here is a plan")
    await alice.new_segment()  # closed: its fold is final, and it is the oldest
    other_chat = await bob.turn("how do I descale a kettle", "vinegar and water")
    await bob.new_segment()
    rig.service.start()
    segments = rig.service.segments
    await through_backoffs(rig, lambda s: s.given_up == 1, "the slow segment given up", segments)
    await idle(rig)

    folded = await rig.store.summaries.segment_summary(other_chat.segment_id)
    assert folded is not None and folded.final and folded.model == "fake/large"
    kept = await rig.store.summaries.segment_summary(slow.segment_id)
    assert kept is not None and kept.final and kept.model == "klaw/verbatim"
    assert len([r for r in rig.summary_requests if asks_about(r.body, SLOW, SEGMENT_INSTRUCTIONS)]) == MAX_TIMEOUTS
