"""The docs' search index: full text and vectors over their sections, ranked like message search.

`KLAW_HOME/docs_index.db` (SQLite, 0600) holds each section of the shipped docs (klaw/tools/docs/bundle.py)
with its vector from the engine's embedder, and an FTS5 table with the messages' tokenizer (porter:
"forget" finds "forgetting"). It is built on first use and rebuilt when the docs' fingerprint or the
embedder's model id changes (a new klaw version, another embedder). A build has two steps: the
sections and their full text (well under a second), then every section's vector (~200 sections of up
to 256 tokens: minutes of CPU on a small machine for the default local embedder). A search during the
second step waits for it at most `VECTOR_WAIT_SECONDS`, then is answered by full text alone (the
vectors are not there yet), so `docs_search` works from the engine's first minute. A search is the
messages' hybrid search on a few hundred rows: the same FTS5 query (stop words dropped, every word
quoted), cosine similarity by a numpy product over all vectors, both sides fused with the same
weights (`search.vectorWeight`, `fusion.score_fusion`), then the best section of each page, best
page first. If the embedder fails, the index is built or searched on full text alone (and built
again with vectors next time), never a failed turn.
Decision: docs/decisions/113-docs-tools.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from contextlib import closing, suppress
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeVar

from klaw.cancellation import cancel_and_wait
from klaw.config import SearchConfig
from klaw.memory.embedder.protocol import Embedder, Vectors, embed_queries
from klaw.memory.fusion import score_fusion
from klaw.private_files import create_private
from klaw.store.sqlite.fts_query import fts5_match_expression, words_of
from klaw.tools.docs.bundle import DocsBundle, DocSection

log = logging.getLogger(__name__)
T = TypeVar("T")

EMBED_BATCH = 32
FTS_CANDIDATES = 40
EXCERPT_CHARS = 400
PAGE_SECTIONS = 3  # sections of a page that count towards its rank
PAGE_DECAY = 0.5
VECTOR_WAIT_SECONDS = 5.0  # how long a search waits for a build's vectors before using full text alone
NO_VECTORS = "none"  # the embedder id recorded when the index was built on full text alone

LAYOUT = "2"  # the tables' shape, part of the fingerprint: an index of another shape is built again
# bm25's weight of each column: the page's title, which every section of the page shares and so tells pages
# apart, not sections (in one column with the heading, "Maintenance: … reindex; backing up …" gave the
# reindex sections a backup question's words); the section's own heading, what it is about; its text; each
# two neighbouring words of heading and text written as one ("back up" found by "backup"). Decision 431.
WEIGHTS = (0.5, 2.0, 1.0, 0.75)  # title, heading, text, joined
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sections (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL, heading TEXT NOT NULL, text TEXT NOT NULL, vector BLOB,
    title TEXT NOT NULL, own TEXT NOT NULL, joined TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS sections_fts USING fts5 (
    title, own, text, joined, content = 'sections', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


@dataclass(frozen=True)
class DocHit:
    path: str
    heading: str
    excerpt: str
    score: float


class DocsIndex:
    def __init__(
        self,
        file: Path,
        bundle: DocsBundle,
        embedder: Embedder | None,
        search: SearchConfig | None = None,
        vector_wait: float = VECTOR_WAIT_SECONDS,
    ) -> None:
        self.file = file
        self.bundle = bundle
        self._bundle = bundle
        self._embedder = embedder
        self._search = search or SearchConfig()
        self._vector_wait = vector_wait
        self._building: asyncio.Task[None] | None = None
        self._writing: asyncio.Future[Any] | None = None  # a build's work in its thread (`_in_thread`)
        self._searchable = asyncio.Event()  # the sections and their full text are current
        self._ready = False  # ... and so are the vectors (or the embedder failed this time)

    async def ensure(self) -> None:
        """Build the index unless it matches the docs and the embedder (once per engine, then cheap)."""
        await asyncio.shield(self._build_started())

    async def warm(self, wait: Callable[[], Awaitable[object]] | None = None) -> None:
        """`ensure` in the background after `wait` (the engine waits a little on its clock, so the build never
        competes with start-up and the first turn), so the first docs_search does not wait for the build; a
        failure is logged (the next search tries again), never raised."""
        try:
            if wait is not None:
                await wait()
            await self.ensure()
        except Exception as exc:
            log.warning("docs index: not built (%s); docs_search will try again", type(exc).__name__)

    def warm_in_background(self, wait: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[None]]:
        """`warm` as a task of its own; returns what stops it and any build in progress (for the engine's
        exit stack)."""
        task = asyncio.create_task(self.warm(wait))

        async def stop() -> None:
            # a cancel of the caller meanwhile is not swallowed with theirs (decision 428)
            await cancel_and_wait(*(running for running in (task, self._building) if running is not None))
            if self._writing is not None:  # cancelling its task does not stop a thread: wait for its work
                with suppress(Exception):
                    await self._writing

        return stop

    async def search(self, query: str, limit: int = 5) -> list[DocHit]:
        """The best section of each page matching `query`, best page first, at most `limit` pages; by full
        text alone when the vectors are still being built after `vector_wait` seconds."""
        build = self._build_started()
        if not self._ready:
            await asyncio.wait({build}, timeout=self._vector_wait)
        if not self._searchable.is_set():
            searchable = asyncio.ensure_future(self._searchable.wait())
            try:
                await asyncio.wait({searchable, build}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                searchable.cancel()
            if build.done() and not self._searchable.is_set():
                build.result()  # the first step failed: say why (a failed build is tried again next time)
        query_vector = await self._embed_query(query) if self._ready else None
        return await asyncio.to_thread(self._search_sync, query, query_vector, limit)

    def _build_started(self) -> asyncio.Task[None]:
        """The build of this engine's index (started once; a failed one is started again)."""
        if self._building is None or (self._building.done() and not self._ready and not self._searchable.is_set()):
            self._building = asyncio.create_task(self._build_once(), name="docs-index")
        return self._building

    async def _build_once(self) -> None:
        fingerprint = f"{LAYOUT}:{await self._in_thread(self._bundle.fingerprint)}"
        wanted = self._embedder.model_id if self._embedder is not None else NO_VECTORS
        stored = await self._in_thread(self._meta)
        if stored != (fingerprint, wanted):
            sections = await self._in_thread(self._bundle.sections)
            await self._in_thread(self._write, sections, None, fingerprint, NO_VECTORS)
            self._searchable.set()
            await self._add_vectors(sections, fingerprint)
        self._searchable.set()
        self._ready = True

    async def _embed_query(self, query: str) -> Vectors | None:
        if self._embedder is None:
            return None
        try:
            return await embed_queries(self._embedder, [query])
        except Exception as exc:  # the vector side degrades to full text alone, as in message search
            log.warning("docs search: the embedder failed (%s); full text alone", type(exc).__name__)
            return None

    async def _add_vectors(self, sections: list[DocSection], fingerprint: str) -> None:
        """The second step: every section's vector, written with the sections again in one transaction (a
        search meanwhile reads the full-text rows); on an embedder failure the index stays full text."""
        import numpy as np

        if self._embedder is None:
            return
        try:
            texts = [f"{s.heading}\n{s.text}" for s in sections]
            batches = [
                await self._embedder.embed(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)
            ]
        except Exception as exc:
            log.warning("docs index: the embedder failed (%s); built on full text alone", type(exc).__name__)
            return
        vectors = np.concatenate(batches) if batches else None
        await self._in_thread(self._write, sections, vectors, fingerprint, self._embedder.model_id)
        log.info("docs index built: %d sections of %d pages", len(sections), len(self._bundle.pages()))

    async def _in_thread(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` in a thread, kept where `stop` can wait for it: a cancelled build's task ends at once,
        but its thread went on writing docs_index.db after the engine had closed (a copy of a closed home
        then met a journal file vanishing under it)."""
        future = asyncio.ensure_future(asyncio.to_thread(work, *args))
        self._writing = future
        return await asyncio.shield(future)

    def _connect(self) -> sqlite3.Connection:
        create_private(self.file)
        os.chmod(self.file, 0o600)
        connection = sqlite3.connect(self.file)
        connection.executescript(_SCHEMA)
        return connection

    def _meta(self) -> tuple[str, str] | None:
        with closing(self._connect()) as db:
            rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if "fingerprint" not in rows or "embedder" not in rows:
            return None
        return rows["fingerprint"], rows["embedder"]

    def _write(self, sections: list[DocSection], vectors: Vectors | None, fingerprint: str, embedder: str) -> None:
        import numpy as np

        with closing(self._connect()) as db:
            if _columns(db, "sections_fts") != ["title", "own", "text", "joined"]:  # an older layout's file
                db.executescript(f"DROP TABLE sections_fts; DROP TABLE sections; {_SCHEMA}")
        with closing(self._connect()) as db, db:
            db.execute("INSERT INTO sections_fts (sections_fts) VALUES ('delete-all')")
            db.execute("DELETE FROM sections")
            for index, section in enumerate(sections):
                blob = None if vectors is None else np.asarray(vectors[index], dtype=np.float32).tobytes()
                joined = joined_pairs(f"{section.own}\n{section.text}")
                cursor = db.execute(
                    "INSERT INTO sections (path, heading, text, vector, title, own, joined)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (section.path, section.heading, section.text, blob, section.title, section.own, joined),
                )
                db.execute(
                    "INSERT INTO sections_fts (rowid, title, own, text, joined) VALUES (?, ?, ?, ?, ?)",
                    (cursor.lastrowid, section.title, section.own, section.text, joined),
                )
            db.execute("DELETE FROM meta")
            db.executemany("INSERT INTO meta VALUES (?, ?)", [("fingerprint", fingerprint), ("embedder", embedder)])

    def _search_sync(self, query: str, query_vector: Vectors | None, limit: int) -> list[DocHit]:
        import numpy as np

        with closing(self._connect()) as db:
            rows = {row[0]: row[1:] for row in db.execute("SELECT id, path, heading, text, vector FROM sections")}
            full_text: dict[int, float] = {}
            expression = fts5_match_expression(query)
            if expression is not None:
                rank = f"bm25(sections_fts, {', '.join(str(weight) for weight in WEIGHTS)})"
                matches = db.execute(
                    f"SELECT rowid, {rank} FROM sections_fts WHERE sections_fts MATCH ? ORDER BY {rank} LIMIT ?",
                    (expression, FTS_CANDIDATES),
                ).fetchall()
                full_text = {rowid: -rank for rowid, rank in matches}
        similarity: dict[int, float] = {}
        with_vectors = [(rowid, row[3]) for rowid, row in rows.items() if row[3] is not None]
        if query_vector is not None and with_vectors:
            matrix = np.frombuffer(b"".join(blob for _, blob in with_vectors), dtype=np.float32)
            matrix = matrix.reshape(len(with_vectors), -1)
            if matrix.shape[1] == query_vector.shape[1]:
                scores = matrix @ query_vector[0]
                best = np.argsort(-scores)[:FTS_CANDIDATES]
                similarity = {with_vectors[i][0]: float(scores[i]) for i in best}
        weight = self._search.vector_weight if similarity else 0.0
        fused = score_fusion([(similarity, weight), (full_text, 1.0 - weight if similarity else 1.0)])
        return _pages(fused, rows, limit)


def joined_pairs(text: str) -> str:
    """Every two neighbouring words of `text` written as one ("back up" → "backup", "set up" → "setup"),
    for the `joined` column: the docs say "back up", a person asks about a "backup", and the tokenizer
    keeps them apart."""
    words = words_of(text)
    return " ".join(first + second for first, second in pairwise(words))


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")]


def _pages(fused: dict[int, float], rows: dict[int, tuple[str, str, str, bytes | None]], limit: int) -> list[DocHit]:
    """Pages ranked by their matching sections: the best one's score, plus half the next one's, a quarter
    of the third's (a page about the question matches in several places; a page that mentions a word
    once does not win on it alone); each shown by its best section. A section long enough to be indexed
    in pieces is scored the same way from its pieces: the words of a question about it may each be in
    another piece (decision 431: "home" in the backup section's table, "backup" in its next paragraph,
    where a reindex section saying "--keep-backup" four times in one piece outranked it)."""
    pieces: dict[tuple[str, str], list[int]] = {}
    for rowid in sorted(fused, key=lambda r: (-fused[r], r)):
        path, heading = rows[rowid][0], rows[rowid][1]
        pieces.setdefault((path, heading), []).append(rowid)
    sections = {section: _decayed(fused[rowid] for rowid in rowids) for section, rowids in pieces.items()}
    by_page: dict[str, list[tuple[str, str]]] = {}
    for section in sorted(sections, key=lambda key: (-sections[key], pieces[key][0])):
        by_page.setdefault(section[0], []).append(section)
    scores = {path: _decayed(sections[section] for section in found) for path, found in by_page.items()}
    ranked = sorted(scores, key=lambda path: (-scores[path], path))[:limit]
    hits = []
    for path in ranked:
        _, heading, text, _ = rows[pieces[by_page[path][0]][0]]
        hits.append(DocHit(path, heading, _excerpt(text), round(scores[path], 4)))
    return hits


def _decayed(scores: Iterable[float]) -> float:
    """The best `PAGE_SECTIONS` of `scores` (best first), each counting `PAGE_DECAY` as much as the one before."""
    return sum(score * PAGE_DECAY**rank for rank, score in enumerate(list(scores)[:PAGE_SECTIONS]))


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1].rstrip() + "…"
