"""`SummarizerService`: the exchange and segment summarizers as one switchable unit (`/summarizer`).

It owns how a summary request is made: the model routed to `routing.tasks.summarization`, called
while holding a background LLM slot, so summaries wait behind interactive turns and subagent runs
instead of starving them. It wires the signals: a stored `exchange_close` or `/new` record wakes
the summarizers; a written summary wakes the embedding queue (its job is already stored) and the
segment summarizer.

Every answer is held to the cap a turn's answers are (`llm/answer_cap.py`, decisions 465 and 469): this call
does not go through the tool loop, so a program's own model (`FunctionModel`) or a server past its
`max_tokens` answering without end was read whole, and its first characters kept as a summary. An answer
past `MAX_ANSWER_CHARS` fails the request with the same words; the summarizer treats it as any malformed
answer (tried again later, after the others; its own words kept after `MAX_ATTEMPTS`), and logs its class only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from klaw.config import SummarizerConfig
from klaw.llm.answer_cap import MAX_ANSWER_CHARS, answer_chars, too_long
from klaw.llm.call_purpose import calling_for
from klaw.llm.messages import ChatMessage
from klaw.llm.protocol import ChatModel
from klaw.memory.embedding_queue import QueueClock
from klaw.memory.ingestion import Ingestion
from klaw.memory.summaries.exchange_summarizer import ExchangeSummarizer, SummaryWork
from klaw.memory.summaries.segment_summarizer import SegmentSummarizer
from klaw.memory.summaries.summary_log import SummaryLog
from klaw.memory.summaries.worker import WorkerStatus
from klaw.store.records import MessageType, StoredMessage
from klaw.store.summaries.records import SummaryCounts

SUMMARY_TEMPERATURE = 0.2


@dataclass(frozen=True)
class SummarizerStatus:
    running: bool
    exchange: WorkerStatus
    segment: WorkerStatus
    pending_exchanges: int  # finished exchanges without a summary yet
    counts: SummaryCounts
    model: str


class SummarizerService:
    def __init__(
        self,
        ingestion: Ingestion,
        model: Callable[[], ChatModel],
        slot: Callable[[], AbstractAsyncContextManager[None]],
        clock: QueueClock,
        config: SummarizerConfig,
        *,
        on_embedding_queued: Callable[[], None] = lambda: None,
    ) -> None:
        """`model` returns the summarization model (the router's task route); `slot` holds a
        background LLM slot for one call. Summaries are logged through `ingestion` (`SummaryLog`)."""
        store = ingestion.store
        work = SummaryWork(
            store,
            SummaryLog(ingestion),
            self._complete,
            clock,
            idle_seconds=config.idle_seconds,
            max_input_tokens=config.max_input_tokens,
        )
        self._store = store
        self._model = model
        self._slot = slot
        self._on_embedding_queued = on_embedding_queued
        self.exchanges = ExchangeSummarizer(
            work,
            batch_exchanges=config.batch_exchanges,
            batch_wait_seconds=config.batch_wait_seconds,
            on_saved=self._exchange_saved,
        )
        self.segments = SegmentSummarizer(
            work,
            rolling_every=config.rolling_every,
            rolling_tokens=config.rolling_tokens,
            skipped_exchanges=lambda: self.exchanges.skipped,
            on_final=on_embedding_queued,
        )

    @property
    def running(self) -> bool:
        return self.exchanges.running or self.segments.running

    def start(self) -> None:
        self.exchanges.start()
        self.segments.start()

    async def stop(self) -> None:
        """Stop both workers; work in flight is done again after the next start."""
        await self.exchanges.aclose()
        await self.segments.aclose()

    aclose = stop

    def notify(self) -> None:
        self.exchanges.notify()
        self.segments.notify()

    def observe(self, stored: StoredMessage) -> None:
        """Called for every stored record (`Ingestion.on_stored`): a turn ended or a segment closed. A
        turn's end is the exchange summarizer's alone: the segment summarizer has new work only once an
        exchange summary is written (or given up), which it is told, or when its segment closes."""
        if stored.record.type is MessageType.SESSION_BREAK:
            self.notify()
        elif stored.record.type is MessageType.EXCHANGE_CLOSE:
            self.exchanges.notify()

    async def wait_idle(self) -> None:
        """Until both workers rest with nothing left to do (each may wake the other). For tests."""
        while True:
            await self.exchanges.wait_idle()
            await self.segments.wait_idle()
            if self.exchanges.resting and self.segments.resting:
                return

    async def status(self) -> SummarizerStatus:
        return SummarizerStatus(
            running=self.running,
            exchange=self.exchanges.status(),
            segment=self.segments.status(),
            pending_exchanges=await self.exchanges.pending(),
            counts=await self._store.summaries.counts(),
            model=self._model().model_id,
        )

    def _exchange_saved(self) -> None:
        self._on_embedding_queued()
        self.segments.notify()

    async def _complete(self, messages: Sequence[ChatMessage], max_tokens: int) -> tuple[str | None, str]:
        model = self._model()
        async with self._slot():
            with calling_for("summary"):
                response = await model.complete(messages, temperature=SUMMARY_TEMPERATURE, max_tokens=max_tokens)
        if answer_chars(response.content, (call.arguments for call in response.tool_calls)) > MAX_ANSWER_CHARS:
            raise too_long(MAX_ANSWER_CHARS, model.model_id, None)
        return response.content, model.model_id
