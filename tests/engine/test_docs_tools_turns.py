"""The docs tools through real engine turns (FakeOpenAiServer over HTTP as the model): the system prompt
says how to use the docs, docs_search finds the forgetting docs first for "how do I forget something",
docs_read returns a page and refuses anything else, docs_list leaves the design decisions out; and the
index is rebuilt when the docs or the embedder change, in a 0600 file under KLAW_HOME."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import stat
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from klaw.config import SearchConfig
from klaw.llm.fake_server import Reply, TextReply, ToolCallsReply, echo_last_user_message
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.tools.docs.bundle import DocsBundle
from klaw.tools.docs.index import DocsIndex
from klaw.tools.docs.tools import DOCS_PROMPT
from tests.engine.harness import running_engine

REPO = Path(__file__).resolve().parents[2]
STEPS = [
    ("docs_search", {"query": "how do I forget something"}),
    ("docs_read", {"path": "memory/forgetting.md"}),
    ("docs_read", {"path": "decisions/000-concepts.md"}),
    ("docs_read", {"path": "../../engine.yaml"}),
    ("docs_list", {}),
]


def tool_results(body: Mapping[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


def model_that_reads_the_docs(body: Mapping[str, Any]) -> Reply:
    last = body["messages"][-1]
    if last.get("role") == "user" and last.get("content") != "how do I make you forget something?":
        return echo_last_user_message(body)
    done = len(tool_results(body))
    if done < len(STEPS):
        name, arguments = STEPS[done]
        return ToolCallsReply(((f"call_{done}", name, json.dumps(arguments)),))
    return TextReply("Use /forget.")


async def test_the_agent_searches_reads_and_lists_its_docs(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.default_reply = model_that_reads_the_docs
        reply = await h.turn("how do I make you forget something?")
        assert reply.text == "Use /forget."
        body = h.server.chat_requests[-1].body
        assert DOCS_PROMPT in body["messages"][0]["content"]  # the system prompt says how to use them
        assert {"docs_list", "docs_read", "docs_search"} <= {t["function"]["name"] for t in body["tools"]}

        found, page, decision, outside, listing = tool_results(body)
        hits = json.loads(found)
        # the page on forgetting, or the slash commands page at its /forget section, comes first
        first = (hits[0]["path"], hits[0]["section"])
        assert first[0] == "memory/forgetting.md" or first == ("commands/slash-commands.md", "Slash commands — /forget")
        assert "memory/forgetting.md" in [hit["path"] for hit in hits[:3]]
        assert "forget" in hits[0]["excerpt"].lower()
        assert len({hit["path"] for hit in hits}) == len(hits)  # one hit per page
        assert page == (REPO / "docs" / "memory" / "forgetting.md").read_text(encoding="utf-8")
        assert "there is no page 'decisions/000-concepts.md'" in decision
        assert "there is no page '../../engine.yaml'" in outside and "models" not in outside
        paths = [entry["path"] for entry in json.loads(listing)]
        assert "index.md" in paths and "memory/forgetting.md" in paths and "skills.md" in paths
        assert not any(path.startswith("decisions/") for path in paths)
        assert {"path": "memory/forgetting.md", "title": "Forgetting"} in json.loads(listing)

        index_file = h.home.docs_index_file
        assert index_file.exists() and stat.S_IMODE(index_file.stat().st_mode) == 0o600


async def test_without_the_docs_group_no_tools_and_no_prompt_paragraph(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"enabled": ["clock"]}) as h:
        await h.turn("hello")
        body = h.server.chat_requests[-1].body
        assert DOCS_PROMPT not in body["messages"][0]["content"]
        assert [t["function"]["name"] for t in body["tools"]] == ["current_time"]
        assert not h.home.docs_index_file.exists()


class CountingEmbedder(FakeEmbedder):
    def __init__(self, dim: int, model: str) -> None:
        super().__init__(dim=dim)
        self._model = model
        self.texts = 0

    @property
    def model_id(self) -> str:
        return self._model

    async def embed(self, texts: Any) -> Any:
        self.texts += len(texts)
        return await super().embed(texts)


async def test_the_index_is_built_once_and_rebuilt_when_the_docs_or_the_embedder_change(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "decisions").mkdir(parents=True)
    (docs / "garden.md").write_text("# Garden\n\nWater the tomatoes every evening.\n", encoding="utf-8")
    (docs / "decisions" / "001-x.md").write_text("# Decision\n\nTomatoes are a decision.\n", encoding="utf-8")
    file = tmp_path / "home" / "docs_index.db"
    first = CountingEmbedder(16, "fake-a")
    hits = await DocsIndex(file, DocsBundle(docs), first, SearchConfig()).search("tomatoes")
    assert [h.path for h in hits] == ["garden.md"] and first.texts == 2  # one section + the query

    again = CountingEmbedder(16, "fake-a")
    await DocsIndex(file, DocsBundle(docs), again).search("tomatoes")
    assert again.texts == 1  # only the query: the stored index matched

    (docs / "bees.md").write_text("# Bees\n\nThe hive needs checking in spring.\n", encoding="utf-8")
    changed = CountingEmbedder(16, "fake-a")
    hits = await DocsIndex(file, DocsBundle(docs), changed).search("when to check the hive")
    assert hits[0].path == "bees.md" and changed.texts == 3

    other = CountingEmbedder(32, "fake-b")
    hits = await DocsIndex(file, DocsBundle(docs), other).search("hive")
    assert hits[0].path == "bees.md" and other.texts == 3  # another embedder: every section again


async def test_the_engine_builds_the_index_in_the_background_soon_after_start(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("hello")
        assert not h.home.docs_index_file.exists()  # not during start-up and the first turn
        await h.clock.advance(10)
        async with asyncio.timeout(10):
            while not _built(h.home.docs_index_file):  # noqa: ASYNC110 - the build leaves only its file to see
                await asyncio.sleep(0.02)
        with closing(sqlite3.connect(h.home.docs_index_file)) as db:
            assert dict(db.execute("SELECT key, value FROM meta"))["embedder"] == "fake-hash-32"


def _built(file: Path) -> bool:
    """Both steps done: the meta names the embedder (the first step writes the full text under "none")."""
    if not file.exists():
        return False
    try:
        with closing(sqlite3.connect(file)) as db:
            return str(dict(db.execute("SELECT key, value FROM meta")).get("embedder", "none")) != "none"
    except sqlite3.OperationalError:  # the build has not created its tables yet
        return False


class HeldEmbedder(FakeEmbedder):
    """Embeds a search's query at once and holds the build's batches until `release` is set, as the
    default local embedder holds a small machine for minutes while it embeds every section."""

    def __init__(self) -> None:
        super().__init__(dim=16)
        self.release = asyncio.Event()

    async def embed(self, texts: Any) -> Any:
        if len(texts) > 1:
            await self.release.wait()
        return await super().embed(texts)


async def test_a_search_while_the_vectors_are_built_is_answered_by_full_text(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "garden.md").write_text("# Garden\n\nWater the tomatoes every evening.\n", encoding="utf-8")
    (docs / "bees.md").write_text("# Bees\n\nThe hive needs checking in spring.\n", encoding="utf-8")
    file = tmp_path / "home" / "docs_index.db"
    embedder = HeldEmbedder()
    index = DocsIndex(file, DocsBundle(docs), embedder, SearchConfig(), vector_wait=0.2)
    stop = index.warm_in_background(lambda: asyncio.sleep(0))  # the engine's background build, started
    async with asyncio.timeout(10):  # on the old code the search waited for the whole build: no answer
        hits = await index.search("tomatoes")
    assert [hit.path for hit in hits] == ["garden.md"]
    with closing(sqlite3.connect(file)) as db:
        assert dict(db.execute("SELECT key, value FROM meta"))["embedder"] == "none"  # vectors still to come
    embedder.release.set()
    async with asyncio.timeout(10):
        await index.ensure()
    with closing(sqlite3.connect(file)) as db:
        assert dict(db.execute("SELECT key, value FROM meta"))["embedder"] == embedder.model_id
        assert db.execute("SELECT count(*) FROM sections WHERE vector IS NULL").fetchone()[0] == 0
    hits = await index.search("when to check the hive")
    assert hits[0].path == "bees.md"
    await stop()


async def test_stopping_the_background_build_waits_for_the_write_under_way(tmp_path: Path) -> None:
    """The engine's exit stops the build; its write runs in a thread, which cancelling the task does not
    stop: it went on writing docs_index.db after the engine had closed (a copy of the closed home met
    the journal file vanishing under it). Stopping now returns once the write has ended."""
    file = tmp_path / "home" / "docs_index.db"
    journal = file.with_name(file.name + "-journal")
    index = DocsIndex(file, DocsBundle.shipped(), None, SearchConfig())
    stop = index.warm_in_background(lambda: asyncio.sleep(0))
    async with asyncio.timeout(10):
        while not journal.exists():  # noqa: ASYNC110 - the write's journal is all there is to see
            await asyncio.sleep(0.0005)
    await stop()
    assert not journal.exists()
    with closing(sqlite3.connect(file)) as db:  # whole: stopped between steps, never inside one
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
