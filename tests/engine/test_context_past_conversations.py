"""The summary and past-conversations layers of the context builder (DESIGN "The turn", layers 3 and 4)."""

from __future__ import annotations

from pathlib import Path

from klaw.config import RagConfig
from klaw.engine.context_builder import SUMMARY_HEADER, ContextBuilder
from klaw.engine.sessions import Session
from klaw.engine.system_prompt import SystemPrompt
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.catalogue import ModelCatalogue
from klaw.memory.core_memory import CoreMemory
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.past_conversations.block import HEADER
from klaw.memory.past_conversations.retriever import PastConversationRetriever
from klaw.store.records import MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import engine_config
from tests.memory.summary_helpers import ALICE, T0
from tests.memory.test_past_conversations import QUERY, past_segments


async def test_layers_sit_in_order_and_subagents_get_no_past_conversations(tmp_path: Path, store: SqliteStore) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    past = await past_segments(store)
    await store.summaries.save_segment_summary(
        past.current, "Still deciding on tea.", "m", final=False, covers_exchange_id=None, exchanges_covered=0, at=T0
    )
    config = engine_config("http://127.0.0.1:9")
    retriever = PastConversationRetriever(store, FakeEmbedder(32), lambda: RagConfig(min_similarity=0.3))
    builder = ContextBuilder(
        ModelCatalogue.from_config(config),
        config.context,
        store,
        SystemPrompt(home.workspace),
        CoreMemory(home.core_memory_file),
        past_conversations=retriever,
    )
    session = Session(ALICE, config.routing.default, await store.segments.current(ALICE))
    pending = [await store.messages.append(MessageRecord(ALICE, Role.USER, QUERY))]

    context = await builder.build(session, pending)
    assert [layer.name for layer in context.layers] == [
        "system_prompt",
        "summary",
        "past_conversations",
        "sliding_window",
        "pending",
    ]
    contents = [m.content or "" for m in context.messages]
    assert contents[1] == f"{SUMMARY_HEADER}\nStill deciding on tea."
    assert contents[2].startswith(HEADER) and f"segment {past.tea_segment} " in contents[2]
    assert f"segment {past.current} " not in contents[2]

    subagent = await builder.build(session, pending, subagent=True)
    assert "past_conversations" not in [layer.name for layer in subagent.layers]
