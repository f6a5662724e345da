"""The exchange summarizer: one or two sentences per finished exchange (asked, done, outcome).

It takes exchanges oldest first, skipping the one still in progress (an `open` exchange is looked at
again on later passes until it closes), summarizes each from its transcript with the summarization
model, and logs the summary (`SummaryLog`; the store folds it with its embedding job in one
transaction, so `klaw reindex` keeps it); then it signals the
embedding queue and the segment summarizer. Which exchanges were looked at is kept in memory (the
highest id scanned and the open ones), so a pass reads only new rows; a restart scans once from the
beginning.

Failures: a model that is down, slow or rate-limited makes the worker back off and try the same
exchange again later, however long it takes. An exchange the model keeps rejecting (bad request,
malformed or empty answer) is given up after `MAX_ATTEMPTS` tries until the next start, so it
cannot block the rest (`BackgroundWorker.gives_up`, shared with the segment summarizer).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from klaw.llm.errors import LlmBadRequestError, LlmMalformedResponseError
from klaw.llm.messages import ChatMessage
from klaw.memory.embedding_queue import QueueClock
from klaw.memory.summaries.prompts import (
    EXCHANGE_ANSWER_TOKENS,
    MAX_EXCHANGE_CHARS,
    EmptySummaryError,
    clean_summary,
    exchange_prompt,
)
from klaw.memory.summaries.summary_log import SummaryLog
from klaw.memory.summaries.worker import BackgroundWorker
from klaw.store.protocol import Storage
from klaw.store.records import Exchange

log = logging.getLogger(__name__)

SCAN_PAGE = 50
# Errors about this item rather than the model's health: retrying cannot help forever.
ITEM_ERRORS = (LlmBadRequestError, LlmMalformedResponseError, EmptySummaryError)


# messages, answer token limit → the model's answer and the model id (holding a background LLM slot)
Summarize = Callable[[Sequence[ChatMessage], int], Awaitable[tuple[str | None, str]]]


class ExchangeSummarizer(BackgroundWorker):
    def __init__(
        self,
        store: Storage,
        summary_log: SummaryLog,
        summarize: Summarize,
        clock: QueueClock,
        *,
        idle_seconds: float,
        max_input_tokens: int,
        on_saved: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__("exchange summarizer", clock, idle_seconds=idle_seconds)
        self._store = store
        self._log = summary_log
        self._summarize = summarize
        self._max_input_tokens = max_input_tokens
        self._on_saved = on_saved
        self._scanned_to = 0
        self._open: frozenset[int] = frozenset()
        self._queue: list[Exchange] = []
        self.skipped: set[int] = set()  # given up until the next start (the segment fold goes past them)

    async def pending(self) -> int:
        """Finished exchanges without a summary (those given up included)."""
        return await self._store.summaries.pending_exchanges()

    async def step(self) -> bool:
        if not self._queue:
            await self._scan()
            if not self._queue:
                return False
        exchange = self._queue[0]
        try:
            written = await self._summarize_one(exchange)
        except ITEM_ERRORS as exc:
            if not self.gives_up(exchange.id, exc, "exchange"):
                raise
            self.skipped.add(exchange.id)
            self._on_saved()  # the segment fold no longer waits for it
        else:
            self.completed += int(written)
            self.succeeded(exchange.id)
        self._queue.pop(0)
        return True

    async def _scan(self) -> None:
        scan = await self._store.summaries.scan_exchanges(self._scanned_to, self._open, SCAN_PAGE)
        self._scanned_to = scan.scanned_to
        self._open = scan.still_open
        self._queue = [e for e in scan.to_summarize if e.id not in self.skipped]

    async def _summarize_one(self, exchange: Exchange) -> bool:
        transcript = await self._store.history.exchange_messages(exchange.id)
        prompt = exchange_prompt(transcript or [], self._max_input_tokens)
        if prompt is None:
            log.info("exchange %d has nothing left to summarize; skipped", exchange.id)
            self.skipped.add(exchange.id)
            return False
        answer, model = await self._summarize(prompt, EXCHANGE_ANSWER_TOKENS)
        text = clean_summary(answer, MAX_EXCHANGE_CHARS)
        saved = await self._log.exchange_summary(exchange, transcript or [], text, model, self._clock.now())
        if saved is None:
            log.info("exchange %d was forgotten while it was summarized; nothing kept", exchange.id)
            self.skipped.add(exchange.id)
            return False
        log.debug("exchange %d summarized (%d chars)", exchange.id, len(text))
        self._on_saved()
        return True
