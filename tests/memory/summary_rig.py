"""The summarizers on a real store and the fake OpenAI server over HTTP, with a manual clock for idle
timeouts and backoff, and the waits tests use: for the state the workers signal (`wait_until`,
`wait_idle`), never by polling, each with a deadline as a safety net only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klaw.engine.clock import ManualClock
from klaw.engine.slots import LlmSlots, Priority
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.router import ModelRouter
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.memory.summaries.service import SummarizerService
from klaw.memory.summaries.worker import BackgroundWorker, WorkerState, WorkerStatus
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import engine_config
from tests.memory.summary_helpers import is_summary_request, summarizing_reply


@dataclass
class Rig:
    store: SqliteStore
    server: FakeOpenAiServer
    clock: ManualClock
    router: ModelRouter
    slots: LlmSlots
    service: SummarizerService
    embeddings_queued: list[int] = field(default_factory=list)

    @property
    def summary_requests(self) -> list[Any]:
        return [r for r in self.server.chat_requests if is_summary_request(r.body)]


@asynccontextmanager
async def summary_rig(
    tmp_path: Path, summarizer: Mapping[str, Any], *, model: Mapping[str, Any] | None = None
) -> AsyncIterator[Rig]:
    """`model`: settings of the summarization model (`fake/large`), e.g. a short `timeoutSeconds`."""
    clock = ManualClock()
    store = await SqliteStore.open(tmp_path / "klaw.db", clock=clock.now)
    async with FakeOpenAiServer(default_reply=summarizing_reply) as server:
        large = {"contextBudget": 32000, "maxRetries": 0, **(model or {})}
        config = engine_config(
            server.base_url,
            routing={"tasks": {"summarization": "fake/large"}},
            summarizer=dict(summarizer),
            models={"fake/large": large},
        )
        router = ModelRouter(ModelCatalogue.from_config(config))
        slots = LlmSlots(2)
        queued: list[int] = []
        service = SummarizerService(
            Ingestion(ConversationLog(tmp_path / "conversations"), store),
            lambda: router.for_task("summarization"),
            lambda: slots.hold(Priority.BACKGROUND),
            clock,
            config.summarizer,
            on_embedding_queued=lambda: queued.append(1),
        )
        try:
            yield Rig(store, server, clock, router, slots, service, queued)
        finally:
            await service.aclose()
            await router.aclose()
            await store.aclose()


async def until(worker: BackgroundWorker, predicate: Callable[[WorkerStatus], bool], what: str) -> WorkerStatus:
    """The worker's status once it signals one matching `predicate` (its work crosses real HTTP and the
    manual clock moves only when told). The 10 s timeout is a safety net: a bug fails, never hangs."""
    try:
        async with asyncio.timeout(10):
            return await worker.wait_until(predicate)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for: {what} ({worker.status()})") from None


async def idle(rig: Rig) -> None:
    """Until both summarizers rest with nothing left to do; a safety net as in `until`."""
    try:
        async with asyncio.timeout(10):
            await rig.service.wait_idle()
    except TimeoutError:
        raise AssertionError(f"gave up waiting for the summarizers to rest ({await rig.service.status()})") from None


def backing_off_after(failures: int) -> Callable[[WorkerStatus], bool]:
    return lambda s: s.state is WorkerState.BACKING_OFF and s.failed == failures


def completed(items: int) -> Callable[[WorkerStatus], bool]:
    return lambda s: s.completed == items
