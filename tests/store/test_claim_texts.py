"""`claim_texts`: the embedding queue's batch and its texts in one call to the store (decision 272), on
both backends, by each target's rule: a message's content, a saved memory's text, an exchange summary
or a final segment summary; None for a job whose target is gone or wants no vector now."""

from __future__ import annotations

from datetime import timedelta

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.store.archival_records import memory_saved_record
from klaw.store.protocol import Storage
from klaw.store.records import MEMORY_TARGET, MESSAGE_TARGET, MessageRecord, Role
from klaw.store.summaries.records import SUMMARY_TARGET
from tests.conftest import StoreOpener
from tests.memory.archive_helpers import ME, ScriptedChat
from tests.memory.summary_helpers import T0, Turns

HOLD = timedelta(minutes=2)
LATER = T0 + timedelta(days=36500)  # every job due


async def test_a_claimed_batch_brings_each_targets_text(home: KlawHome, open_store: StoreOpener) -> None:
    clock = ManualClock(LATER)
    store: Storage = await open_store(clock=clock.now)
    embedder = FakeEmbedder(dim=8)
    await store.summaries.bind_embedder(embedder.model_id, embedder.dim)
    said = await store.messages.append(MessageRecord(ME, Role.USER, "the garden needs water"), embed=True)
    memory = await ScriptedChat(home, store).accept(memory_saved_record(ME, "the bike lock code is 4711", T0))
    tea = await Turns(store).turn("green tea?", "80 degrees")
    summary = await store.summaries.save_exchange_summary(tea, "Asked about green tea.", "m", T0)
    assert summary is not None

    claimed = await store.embedding_jobs.claim_texts(clock.now(), 10, HOLD)

    assert {(c.job.target, c.job.target_rowid): c.text for c in claimed} == {
        (MESSAGE_TARGET, said.rowid): "the garden needs water",
        (MEMORY_TARGET, memory.rowid): "the bike lock code is 4711",
        (SUMMARY_TARGET, summary.id): "Asked about green tea.",
    }
    if store.leases is not None:  # a store engines share: claimed as `claim` does, held from the others
        assert await store.embedding_jobs.claim_texts(clock.now(), 10, HOLD) == []


async def test_a_job_whose_target_wants_no_vector_now_comes_without_text(open_store: StoreOpener) -> None:
    clock = ManualClock(LATER)
    store: Storage = await open_store(clock=clock.now)
    await store.summaries.bind_embedder("fake-8", 8)
    tea = await Turns(store).turn("green tea?", "80 degrees")
    final = await store.summaries.save_segment_summary(
        tea.segment_id, "Tea.", "m", final=True, covers_exchange_id=tea.id, exchanges_covered=1, at=T0
    )
    assert final is not None
    # Rolled back to a rolling (not final) summary before the queue got to it: no vector wanted.
    await store.summaries.save_segment_summary(
        tea.segment_id, "Tea, then coffee.", "m", final=False, covers_exchange_id=tea.id, exchanges_covered=1, at=T0
    )
    bike = await Turns(store).turn("bike chain?", "oil it")
    gone = await store.summaries.save_exchange_summary(bike, "Asked about a bike chain.", "m", T0)
    assert gone is not None
    await store.summaries.forget_exchanges([bike.id])

    claimed = await store.embedding_jobs.claim_texts(clock.now(), 10, HOLD)

    texts = {c.job.target_rowid: c.text for c in claimed if c.job.target == SUMMARY_TARGET}
    assert texts.get(final.id, "not claimed") is None
    assert texts.get(gone.id, "not claimed") is None
