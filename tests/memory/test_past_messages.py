"""The `messages` stage of past-conversation retrieval: past segments' own messages found directly and
fused with the segment-first path in the block, on a real store with the fake embedder (dim 32)."""

from __future__ import annotations

from pathlib import Path

from klaw.config import RagConfig
from klaw.llm.tokens import approximate_token_count
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.past_conversations.past_messages import PastMessages
from klaw.memory.past_conversations.pipeline import Retrieval
from klaw.memory.past_conversations.retriever import default_pipeline
from klaw.store.records import MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, Conversation
from tests.memory.test_past_conversations import embed_summaries, saved

DIM = 32
TRIP = "We spent two nights in Carcassonne inside the old walls, then drove on to the coast."
OPTIMIZE = "INSERT INTO messages_fts (messages_fts) VALUES ('optimize')"
STEP = 10  # the progress handler is called every STEP instructions
SUMMARY = "The person talked about a holiday in the south of France and the long drive home afterwards."


async def chat_with_a_past_trip(store: SqliteStore, summary_text: str = SUMMARY) -> tuple[Conversation, int, int]:
    """A closed segment whose summary leaves the place out, then a current segment that names it too."""
    chat = await Conversation(store).bind()
    await store.summaries.bind_embedder(chat.embedder.model_id, DIM)
    trip = await chat.say(TRIP)
    await chat.filler(3)
    summary = await store.summaries.save_segment_summary(
        trip.segment_id,
        summary_text,
        "m",
        final=True,
        covers_exchange_id=None,
        exchanges_covered=0,
        at=chat._next_time(),
    )
    await embed_summaries(store, [saved(summary)])
    await chat.new_segment()
    await chat.say("Carcassonne again next year, maybe")  # the current segment: never shown as past
    return chat, trip.segment_id, await chat.segment_id()


def ask(current: int, query: str, settings: RagConfig | None = None, budget: int = 1000) -> Retrieval:
    return Retrieval(ALICE, current, query, settings or RagConfig(), budget)


async def test_a_name_the_summary_left_out_is_shown_under_its_segment(store: SqliteStore) -> None:
    chat, past, current = await chat_with_a_past_trip(store)
    result = await default_pipeline(store, chat.embedder).run(ask(current, "Carcassonne?"))
    assert result.block is not None
    lines = result.block.splitlines()
    assert lines[1].startswith(f"- segment {past} (") and "found by its messages" in lines[1]
    assert lines[2].startswith("  - said ") and lines[2].endswith(f"[user] {TRIP}")
    assert [m.message.segment_id for s in result.shown for m in s.messages] == [past]


async def test_small_talk_and_unrelated_words_find_no_past_message(store: SqliteStore) -> None:
    chat, _, current = await chat_with_a_past_trip(store)
    pipeline = default_pipeline(store, chat.embedder)
    for query in ["ok thanks", "good morning!", "what should I cook for dinner?"]:
        result = await pipeline.run(ask(current, query))
        assert result.block is None and result.messages == (), query


async def test_the_stage_alone_keeps_at_most_three_best_first_never_of_the_current_segment(
    store: SqliteStore,
) -> None:
    chat, past, current = await chat_with_a_past_trip(store)
    stage = PastMessages(store, HybridSearch(store, chat.embedder), max_distance=2.0)  # every vector is close
    result = await stage(ask(current, "the old walls of carcassonne and the coast"))
    assert 0 < len(result.messages) <= 3 and result.messages[0].message.content == TRIP
    assert {hit.message.segment_id for hit in result.messages} == {past}
    assert [hit.summary.text for hit in result.message_segments] == [SUMMARY]


async def test_a_long_summary_gives_way_to_the_messages_within_the_budget(store: SqliteStore) -> None:
    """Whole, the summary would fill the block; shown for its messages it is cut to 60 tokens, and the
    message that is the evidence fits."""
    long_summary = " ".join([SUMMARY] * 8)
    _, _, current = await chat_with_a_past_trip(store, long_summary)
    result = await default_pipeline(store, FakeEmbedder(DIM)).run(ask(current, "Carcassonne?", budget=160))
    assert result.block is not None and approximate_token_count(result.block) <= 160
    assert TRIP in result.block and long_summary not in result.block


async def test_a_name_the_past_never_said_shuts_meaning_out_but_not_dates_or_known_words(store: SqliteStore) -> None:
    """Every vector counts as close here: what decides is whether the question names someone the past
    never mentioned ("Gina"). A date ("on May 3, 2023") is no name; a rare word the past did say
    ("Carcassonne") still opens the gate beside an unknown name."""
    chat, _, current = await chat_with_a_past_trip(store)
    pipeline = default_pipeline(store, chat.embedder, max_message_distance=2.0)
    result = await pipeline.run(ask(current, "what did Gina say about the old walls?"))
    assert result.unknown_names == ("gina",) and result.block is None
    for query in ["what did we see by the old walls on May 3, 2023?", "did Gina like Carcassonne?"]:
        result = await pipeline.run(ask(current, query))
        assert result.block is not None and TRIP in result.block, query


async def stage_steps(tmp_path: Path, current_messages: int) -> int:
    """SQLite instructions the stage runs (apsw's progress handler: the same on any machine and load)
    for a question whose words the current segment holds `current_messages` times over."""
    store = await SqliteStore.open(tmp_path / f"klaw-{current_messages}.db")
    try:
        chat, past, current = await chat_with_a_past_trip(store)
        said = [
            MessageRecord(ALICE, Role.USER, f"the old walls and the coast, photo {i}", created_at=chat._next_time())
            for i in range(current_messages)
        ]
        await store.messages.append_many(said)
        # One b-tree for the index, as FTS5's merges leave a settled one: otherwise the number of
        # its segments, which every query looks each word up in, grows with the rows appended.
        await store.db.run(lambda connection: connection.execute(OPTIMIZE))
        stage = PastMessages(store, HybridSearch(store, chat.embedder), max_distance=2.0)
        question = ask(current, "the old walls of carcassonne and the coast")
        await stage(question)  # how many messages hold each word is counted once (term_counts.py)
        steps = 0

        def count() -> bool:
            nonlocal steps
            steps += STEP
            return False

        await store.db.run(lambda connection: connection.set_progress_handler(count, STEP))
        result = await stage(question)
        assert result.messages[0].message.content == TRIP
        assert {hit.message.segment_id for hit in result.messages} == {past}
        return steps
    finally:
        await store.aclose()


async def test_the_stage_reads_the_past_only_however_long_the_current_segment(tmp_path: Path) -> None:
    """The past is searched within its own rowids: the current segment's matches, never candidates,
    cost nothing. Before, each was scored and looked up (the scope was a time, not segments), so
    the stage's cost grew with the conversation going on now."""
    short, long = await stage_steps(tmp_path, 20), await stage_steps(tmp_path, 600)
    assert long <= short * 1.1, (short, long)


ASKED = "How did the Zorblax audition go, did they give you the part?"
ANSWERED = "Yes! I start rehearsals on Monday, three evenings a week."


async def test_a_past_reply_is_shown_after_the_question_that_lent_to_it(store: SqliteStore) -> None:
    """ "Zorblax audition?" after /new: the past message that matches is the agent's question, the
    person's reply says what happened but names nothing of it. The block shows the reply with the
    question on the line before it (the reply ranks first: the question lent it its score)."""
    chat = await Conversation(store).bind()
    await store.summaries.bind_embedder(chat.embedder.model_id, DIM)
    await chat.filler(2)
    question = await chat.say(ASKED, Role.ASSISTANT)
    reply = await chat.say(ANSWERED)
    summary = await store.summaries.save_segment_summary(
        reply.segment_id, SUMMARY, "m", final=True, covers_exchange_id=None, exchanges_covered=0, at=chat._next_time()
    )
    await embed_summaries(store, [saved(summary)])
    await chat.new_segment()
    await chat.say("hello again")
    result = await default_pipeline(store, chat.embedder).run(ask(await chat.segment_id(), "Zorblax audition?"))
    print(
        [(h.message.rowid, h.score, h.distance, h.fts_rank, h.context_of, h.asked is not None) for h in result.messages]
    )
    assert result.messages[0].message.rowid == reply.rowid and result.messages[0].asked is not None
    assert result.block is not None
    lines = result.block.splitlines()
    said = [line for line in lines if line.startswith("  - said ")]
    assert said[:2] == [line for line in said if "Zorblax" in line or "rehearsals" in line][:2]
    assert said[0].endswith(f"[assistant] {ASKED}") and said[1].endswith(f"[user] {ANSWERED}"), lines
    assert [m.message.rowid for s in result.shown for m in s.messages][:2] == [question.rowid, reply.rowid]
