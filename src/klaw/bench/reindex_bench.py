"""`klaw reindex` throughput: a home whose log holds N messages, rebuilt and embedded from scratch.

The log is written the way the engine writes it (`ConversationLog.append_many`, one fsync per
batch) with Zipfian text (`corpus.py`), then `reindex` runs exactly as the command does, with the
configured embedder, always into SQLite in the bench's own throwaway home (never the person's database).
Rows per second (log → messages, FTS, segments, exchanges) and embeddings per
second are reported apart: the second is the embedder's speed, the first is klaw's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from klaw.bench.corpus import BENCH_START, ZipfCorpus
from klaw.config import DatabaseConfig, EngineConfig
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.reindex import ReindexStage, reindex
from klaw.store.records import ChatRef

Progress = Callable[[str, int, int], None]
CHAT = ChatRef("bench", "reindex")
LOG_BATCH = 1000


@dataclass(frozen=True)
class ReindexBenchResult:
    messages: int
    embedded: int
    embedder: str
    seconds: float
    messages_per_s: float
    rows_per_s: float
    embedded_per_s: float


async def measure_reindex(
    root: Path, config: EngineConfig, *, messages: int, seed: int = 5, progress: Progress | None = None
) -> ReindexBenchResult:
    home = KlawHome(root)
    initialise_home(home)
    corpus = ZipfCorpus(seed=seed)
    log = ConversationLog(home.conversations)
    for first in range(0, messages, LOG_BATCH):
        count = min(LOG_BATCH, messages - first)
        await log.append_many(corpus.chat_records(CHAT, first, count, BENCH_START))
        if progress:
            progress("write log", first + count, messages)

    def report(stage: ReindexStage, done: int, total: int) -> None:
        if progress:
            progress(f"reindex {stage.value}", done, total)

    # SQLite in the throwaway home, whatever the person's `database` says: on their PostgreSQL, or an
    # absolute SQLite path, the rebuild replaced their own memory under a running engine (newcomer14).
    throwaway = config.model_copy(update={"database": DatabaseConfig(tokenizer=config.database.tokenizer)})
    result = await reindex(home, throwaway, progress=report)
    embed_stage = next((s for s in result.stages if s.stage is ReindexStage.EMBED), None)
    return ReindexBenchResult(
        messages=result.records,
        embedded=result.embedded,
        embedder=config.embedder.backend,
        seconds=result.seconds,
        messages_per_s=result.records / result.seconds if result.seconds > 0 else 0.0,
        rows_per_s=result.rows_per_second,
        embedded_per_s=embed_stage.per_second if embed_stage else 0.0,
    )
