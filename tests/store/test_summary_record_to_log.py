"""The summary log's calls to the store (decision 272), on both backends: `summary_record_to_log`, the
id lookup and foldable check in one call (the record built on the exchange's opening record when it
would be folded, none when a source is gone, `opened` False for an exchange with no opening record),
`append_record`, the append bringing back the summary its fold kept, and `scan_exchanges` bringing the
records of each exchange to summarize."""

from __future__ import annotations

from klaw.store.protocol import Storage
from klaw.store.records import MessageRecord, Role
from klaw.store.summaries.log_records import exchange_summary_record, segment_summary_record
from klaw.store.summaries.records import SummaryKind
from tests.memory.summary_helpers import ALICE, T0, Turns


async def test_the_record_is_built_on_the_opening_record_and_given_back_when_it_would_be_folded(
    storage: Storage,
) -> None:
    tea = await Turns(storage).turn("green tea?", "80 degrees")
    sources = [m.record.id for m in await storage.history.exchange_messages(tea.id) or []]
    named: list[str] = []

    def build(opened: str, sources: list[str] = sources) -> MessageRecord:
        named.append(opened)
        return exchange_summary_record(ALICE, "Asked about tea.", exchange=opened, sources=sources, model="m", at=T0)

    found = await storage.summaries.summary_record_to_log(tea.id, build)

    assert named == [await storage.summaries.exchange_record_id(tea.id)]
    assert found.opened and found.record is not None and (found.record.metadata or {}).get("exchange") == named[0]
    await storage.messages.append(found.record)
    stored = await storage.summaries.exchange_summary(tea.id)
    assert stored is not None and stored.record_id == found.record.id

    gone = await storage.summaries.summary_record_to_log(tea.id, lambda opened: build(opened, [*sources, "forgotten"]))
    assert gone.opened and gone.record is None


async def test_an_exchange_without_an_opening_record_is_stored_directly(storage: Storage) -> None:
    said = await storage.messages.append(MessageRecord(ALICE, Role.USER, "green tea?", created_at=T0))
    older = await storage.exchanges.open(ALICE, said.segment_id, said.rowid, T0)  # as an older klaw kept it

    def build(opened: str) -> MessageRecord:
        raise AssertionError("no opening record to name")

    found = await storage.summaries.summary_record_to_log(older.id, build)
    assert not found.opened and found.record is None


async def test_an_appended_summary_record_comes_back_with_the_summary_its_fold_kept(storage: Storage) -> None:
    tea = await Turns(storage).turn("green tea?", "80 degrees")
    sources = [m.record.id for m in await storage.history.exchange_messages(tea.id) or []]
    opened = await storage.summaries.exchange_record_id(tea.id)
    assert opened is not None
    written: list[str] = []
    record = exchange_summary_record(ALICE, "Asked about tea.", exchange=opened, sources=sources, model="m", at=T0)

    stored, summary = await storage.summaries.append_record(record, log_first=lambda: written.append(record.id))

    assert written == [record.id]  # the log's write ran first
    assert stored.record.id == record.id and summary is not None
    assert summary == await storage.summaries.exchange_summary(tea.id) and summary.record_id == record.id
    # A record naming a source no longer stored is appended (it is in the log) but kept as no summary.
    orphan = exchange_summary_record(ALICE, "Retells a gone line.", exchange=opened, sources=["gone"], model="m", at=T0)
    stored, kept = await storage.summaries.append_record(orphan)
    assert stored.record.id == orphan.id and kept is None
    assert (await storage.summaries.exchange_summary(tea.id)) == summary
    # A rolling segment summary comes back as its segment's summary, not as an exchange's of the segment.
    rolling = segment_summary_record(
        ALICE, "Tea, so far.", covers=opened, final=False, exchanges_covered=1, sources=[record.id], model="m", at=T0
    )
    _, rolled = await storage.summaries.append_record(rolling)
    assert rolled is not None and (rolled.kind, rolled.text, rolled.record_id) == (
        SummaryKind.SEGMENT,
        "Tea, so far.",
        rolling.id,
    )
    assert rolled == await storage.summaries.segment_summary(tea.segment_id)


async def test_a_scan_brings_the_records_of_each_exchange_to_summarize(storage: Storage) -> None:
    turns = Turns(storage)
    tea = await turns.turn("green tea?", "80 degrees")
    bike = await turns.turn("bike chain?", "oil it")
    await turns.open_turn("and coffee?")  # in progress: no records brought

    scan = await storage.summaries.scan_exchanges(0, (), 50)

    assert [e.id for e in scan.to_summarize] == [tea.id, bike.id]
    assert scan.messages == {
        tea.id: await storage.history.exchange_messages(tea.id),
        bike.id: await storage.history.exchange_messages(bike.id),
    }
    assert [m.content for m in scan.messages[tea.id] if m.content] == ["green tea?", "80 degrees"]
