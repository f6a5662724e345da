"""The exchange summarizer: one or two sentences per finished exchange (asked, done, outcome).

It takes exchanges oldest first, skipping the one still in progress (an `open` exchange is looked at
again on later passes until it closes), and logs each one's summary (`SummaryLog`; the store folds
it with its embedding job in one transaction, so `klaw reindex` keeps it); then it signals the
embedding queue and the segment summarizer. Which exchanges were looked at is kept in memory (the
highest id scanned and the open ones), so a pass reads only new rows; a restart scans once from the
beginning.

Fewer model calls (docs/decisions/150-fewer-summary-calls.md): small talk is summarized by a rule,
at once (`small_talk.py`); the other exchanges of a segment wait to share one request
(`exchange_batches.py`), asked as numbered exchanges and answered one line each. An exchange the
answer leaves out is asked again alone; a batch the model rejects is split into single requests.

Failures: a model that is down or rate-limited makes the worker back off and try again later,
however long it takes. An exchange whose request failed is set back behind the others, so one that
keeps failing never holds up the rest. One the model keeps rejecting alone (bad request, malformed
answer) is given up after `MAX_ATTEMPTS` tries, one it answers with no text at once, one that keeps
timing out while the model answers others after `MAX_TIMEOUTS` (`BackgroundWorker.fails_on`, shared
with the segment summarizer), and its own words are kept as its summary (`verbatim.py`): the give-up
is logged like a summary, so no later start asks again. A batch that times out is asked one by one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from klaw.llm.errors import LlmTimeoutError
from klaw.llm.messages import ChatMessage
from klaw.memory.embedding_queue import QueueClock
from klaw.memory.summaries.exchange_batches import ExchangeBatches, Waiting
from klaw.memory.summaries.prompts import (
    EXCHANGE_ANSWER_TOKENS,
    MAX_EXCHANGE_CHARS,
    EmptySummaryError,
    Transcript,
    batch_prompt,
    clean_summary,
    exchange_prompt,
    numbered_answers,
)
from klaw.memory.summaries.small_talk import SMALL_TALK_MODEL, small_talk_summary
from klaw.memory.summaries.summary_log import SummaryLog
from klaw.memory.summaries.verbatim import VERBATIM_MODEL, verbatim_exchange
from klaw.memory.summaries.worker import ITEM_ERRORS, BackgroundWorker
from klaw.store.protocol import Storage
from klaw.store.records import Exchange, StoredMessage

log = logging.getLogger(__name__)

SCAN_PAGE = 50
# Signalled scans at most this often (real seconds): with 50 chats at once an exchange closes every ~20 ms and
# each close asked for a scan, ~0.5 a turn; waiting this long gathers a burst's closes into one (decision 304).
SCAN_GATHER_SECONDS = 0.2


# messages, answer token limit → the model's answer and the model id (holding a background LLM slot)
Summarize = Callable[[Sequence[ChatMessage], int], Awaitable[tuple[str | None, str]]]


@dataclass(frozen=True, slots=True)
class SummaryWork:
    """What both summarizers work with: the store, the log their summaries go to, the model call, the
    clock, and the `summarizer` section's rest between scans and input limit."""

    store: Storage
    log: SummaryLog
    summarize: Summarize
    clock: QueueClock
    idle_seconds: float
    max_input_tokens: int


class ExchangeSummarizer(BackgroundWorker):
    def __init__(
        self,
        work: SummaryWork,
        *,
        batch_exchanges: int = 1,
        batch_wait_seconds: float = 0.0,
        on_saved: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__("exchange summarizer", work.clock, idle_seconds=work.idle_seconds)
        self._work = work
        self._on_saved = on_saved
        self._scanned_to = 0
        self._open: frozenset[int] = frozenset()
        self._scan_due = True  # notified, or the last scan filled its page, since the last scan
        self._scanned_at: datetime | None = None
        self._scanned_at_real = -SCAN_GATHER_SECONDS  # loop time of the last scan, for `_gathered`
        self._signalled = False  # notified since the last scan (a full page or the idle timer scan at once)
        self._queue: list[Exchange] = []  # scanned, not yet sorted into small talk or a batch
        self._scanned: dict[int, list[StoredMessage]] = {}  # their records, read with the scan
        self._batches = ExchangeBatches(
            most=batch_exchanges, wait_seconds=batch_wait_seconds, max_tokens=work.max_input_tokens, turn=self.turn
        )
        self.skipped: set[int] = set()  # nothing left to summarize (the segment fold goes past them)

    async def pending(self) -> int:
        """Finished exchanges without a summary (those waiting for a batch included)."""
        return await self._work.store.summaries.pending_exchanges()

    def notify(self) -> None:
        self._scan_due = True
        self._signalled = True
        super().notify()

    async def step(self) -> bool:
        if not self._queue and self._should_scan():
            if self._signalled:
                await self._gathered()
            await self._scan()
        if self._queue:
            await self._sort(self._queue[0])
            self._queue.pop(0)
            return True
        batch = await self._due_batch()
        if batch is None:
            return False
        if len(batch) == 1:
            await self._alone(batch[0].exchange)
        else:
            await self._together(batch)
        return True

    def _should_scan(self) -> bool:
        """Scan again only when something may have changed: a signal (an exchange closed, a segment
        ended), a full page last time, or `idle_seconds` gone by (work nobody signalled). The pass
        after sorting a scan's exchanges would otherwise ask the database again, once a turn, for nothing."""
        if self._scan_due or self._scanned_at is None:
            return True
        return (self._clock.now() - self._scanned_at).total_seconds() >= self._idle_seconds

    async def _gathered(self) -> None:
        """Wait until `SCAN_GATHER_SECONDS` went by since the last scan, so that the exchanges many chats close
        meanwhile are read in one scan rather than one scan each. In real time, not on the clock: a manual
        clock in tests does not move by itself, and the wait is about the machine's work, not the chat's."""
        loop = asyncio.get_running_loop()
        wait = self._scanned_at_real + SCAN_GATHER_SECONDS - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)

    async def _scan(self) -> None:
        self._scanned_at_real = asyncio.get_running_loop().time()
        self._scan_due = self._signalled = False  # a signal while the query runs sets them again
        self._scanned_at = self._clock.now()
        scan = await self._work.store.summaries.scan_exchanges(self._scanned_to, self._open, SCAN_PAGE)
        self._scanned_to = scan.scanned_to
        self._open = scan.still_open
        self._queue = [e for e in scan.to_summarize if e.id not in self.skipped and e.id not in self._batches]
        self._scanned = {e.id: scan.messages[e.id] for e in self._queue if e.id in scan.messages}
        if len(scan.to_summarize) + len(scan.still_open) >= SCAN_PAGE:
            self._scan_due = True  # the page may have been full (a count at least as large as its rows)

    async def _sort(self, exchange: Exchange) -> None:
        """Small talk is summarized at once by the rule; anything else waits for its batch. The records come
        with the scan (decision 272); a batch reads them again when it is sent (one forgotten meanwhile
        is not sent), and a summary is logged only if what it was written from is still stored."""
        messages = self._scanned.pop(exchange.id, None)
        if messages is None:
            messages = await self._work.store.history.exchange_messages(exchange.id) or []
        transcript = Transcript.of(messages)
        if transcript is None:
            self._nothing_left(exchange)
            return
        rule = small_talk_summary(transcript)
        if rule is not None:
            await self._save(exchange, messages, rule, SMALL_TALK_MODEL)
            return
        self._batches.add(exchange, transcript.tokens)

    async def _due_batch(self) -> list[Waiting] | None:
        """The next batch due, the segment waiting longest first. Which segments are closed is one query
        for all of them: many chats each waiting for a batch made this one query per chat, every pass."""
        segments = self._batches.waiting_in()
        if not segments:
            return None
        still_open = await self._work.store.segments.open_among(segments)
        return self._batches.next_due(still_open, now=self._clock.now())

    async def _alone(self, exchange: Exchange) -> None:
        """One exchange in its own request; kept verbatim when the model gives no summary of it
        (`BackgroundWorker.fails_on`), else set back behind the others and tried again later."""
        try:
            await self._summarize_one(exchange)
        except Exception as exc:
            if not self.fails_on(exchange.id, exc, "exchange"):
                raise
            await self._keep_verbatim(exchange)
        self._batches.remove(exchange.id)

    async def _keep_verbatim(self, exchange: Exchange) -> None:
        """The model gave no summary: the exchange's own words are logged as its summary, for good."""
        messages = await self._work.store.history.exchange_messages(exchange.id) or []
        transcript = Transcript.of(messages)
        if transcript is None:
            self._nothing_left(exchange)
            return
        await self._save(exchange, messages, verbatim_exchange(transcript), VERBATIM_MODEL)

    async def _summarize_one(self, exchange: Exchange) -> None:
        transcript = await self._work.store.history.exchange_messages(exchange.id) or []
        prompt = exchange_prompt(transcript, self._work.max_input_tokens)
        if prompt is None:
            self._nothing_left(exchange)
            return
        answer, model = await self._work.summarize(prompt, EXCHANGE_ANSWER_TOKENS)
        self.answered()
        await self._save(exchange, transcript, clean_summary(answer, MAX_EXCHANGE_CHARS), model)

    async def _together(self, batch: Sequence[Waiting]) -> None:
        """Several exchanges in one request (read again now: one forgotten while it waited is not sent)."""
        present: list[tuple[Exchange, list[StoredMessage], Transcript]] = []
        for item in batch:
            messages = await self._work.store.history.exchange_messages(item.exchange.id) or []
            transcript = Transcript.of(messages)
            if transcript is None:
                self._nothing_left(item.exchange)
            else:
                present.append((item.exchange, messages, transcript))
        if len(present) < 2:
            self._batches.ask_alone(exchange.id for exchange, _, _ in present)
            return
        prompt = batch_prompt([t for _, _, t in present], self._work.max_input_tokens)
        try:
            answer, model = await self._work.summarize(prompt, EXCHANGE_ANSWER_TOKENS * len(present))
        except (*ITEM_ERRORS, LlmTimeoutError) as exc:
            # A timeout too: a shorter request may fit the time, and each alone counts its own timeouts.
            log.info("a batch of %d exchanges failed (%s); each is asked alone", len(present), type(exc).__name__)
            self._batches.ask_alone(exchange.id for exchange, _, _ in present)
            if isinstance(exc, LlmTimeoutError):
                raise  # back off: the model may be slow for everything
            return
        self.answered()
        texts = numbered_answers(answer, len(present))
        left_out: list[int] = []
        for number, (exchange, messages, _) in enumerate(present, start=1):
            try:
                text = clean_summary(texts.get(number), MAX_EXCHANGE_CHARS)
            except EmptySummaryError:
                left_out.append(exchange.id)
                continue
            await self._save(exchange, messages, text, model, signal=False)
        self._on_saved()  # once for the batch: the segment fold sees it whole
        if left_out:
            log.info("a batch answer left out %d of %d exchanges; they are asked alone", len(left_out), len(present))
            self._batches.ask_alone(left_out)

    async def _save(
        self, exchange: Exchange, transcript: Sequence[StoredMessage], text: str, model: str, *, signal: bool = True
    ) -> None:
        saved = await self._work.log.exchange_summary(exchange, transcript, text, model, self._clock.now())
        self._batches.remove(exchange.id)
        if saved is None:
            log.info("exchange %d was forgotten while it was summarized; nothing kept", exchange.id)
            self.skipped.add(exchange.id)
            self._on_saved()  # the segment fold no longer waits for it
            return
        log.debug("exchange %d summarized (%d chars)", exchange.id, len(text))
        self.completed += 1
        self.succeeded(exchange.id)
        if signal:
            self._on_saved()

    def _nothing_left(self, exchange: Exchange) -> None:
        log.info("exchange %d has nothing left to summarize; skipped", exchange.id)
        self.skipped.add(exchange.id)
        self._batches.remove(exchange.id)
        self._on_saved()  # the segment fold no longer waits for it
