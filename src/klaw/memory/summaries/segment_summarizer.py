"""The segment summarizer: a rolling summary of each segment, final once the segment is closed.

It folds exchange summaries into the segment's summary with the summarization model: the summary
so far plus the next exchange summaries in, the updated summary out, at most `FOLD_MAX` at a time
so a long segment never makes one huge request. The open segment's summary is rolled forward once
the new exchange summaries hold `rollingTokens` tokens, or `rollingEvery` of them wait however short
(it feeds the context's "summary" layer): a run of short exchanges, small talk above all, no longer
costs a fold every few turns (docs/decisions/150-fewer-summary-calls.md). A closed
segment is folded to its end as soon as no exchange of it still waits for its own summary, and that
final summary is what cross-conversation retrieval searches (it alone is embedded). A rolling
summary that already covers everything when its segment closes just becomes final, without a call.

Failures behave as in the exchange summarizer: back off and retry, the failed segment after the
others; a segment whose fold the model keeps rejecting, answers with no text, or keeps timing out on
while it answers others, is folded by a rule instead (`verbatim.py`), for good.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from klaw.llm.tokens import approximate_token_count
from klaw.memory.summaries.exchange_summarizer import SummaryWork
from klaw.memory.summaries.prompts import (
    MAX_SEGMENT_CHARS,
    SEGMENT_ANSWER_TOKENS,
    clean_summary,
    segment_prompt,
)
from klaw.memory.summaries.verbatim import VERBATIM_MODEL, verbatim_segment
from klaw.memory.summaries.worker import BackgroundWorker
from klaw.store.summaries.records import SegmentWork

log = logging.getLogger(__name__)

FOLD_MAX = 20
WORK_PAGE = 100


class SegmentSummarizer(BackgroundWorker):
    def __init__(
        self,
        work: SummaryWork,
        *,
        rolling_every: int,
        rolling_tokens: int | None = None,
        skipped_exchanges: Callable[[], Collection[int]] = frozenset,
        on_final: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__("segment summarizer", work.clock, idle_seconds=work.idle_seconds)
        self._work = work
        self._rolling_every = rolling_every
        self._rolling_tokens = rolling_tokens
        self._skipped_exchanges = skipped_exchanges
        self._on_final = on_final

    async def step(self) -> bool:
        works = await self._work.store.summaries.segment_work(
            rolling_every=self._rolling_every,
            # A candidate filter in characters: a token is never fewer than two (llm/tokens.py).
            rolling_chars=None if self._rolling_tokens is None else 2 * self._rolling_tokens,
            skip_exchanges=self._skipped_exchanges(),
            limit=WORK_PAGE,
        )
        # A segment whose fold failed goes after the others (decision 261): it never holds them up.
        for work in sorted(works, key=lambda w: self.turn(w.segment.id)):  # stable: the store's order otherwise
            if self._actionable(work):
                await self._attempt(work)
                return True
        return False

    def _actionable(self, work: SegmentWork) -> bool:
        if not work.closed:
            if len(work.new) >= self._rolling_every:
                return True
            tokens = sum(approximate_token_count(s.text) for s in work.new)
            return self._rolling_tokens is not None and tokens >= self._rolling_tokens
        return not work.waiting and (bool(work.new) or (work.summary is not None and not work.summary.final))

    async def _attempt(self, work: SegmentWork) -> None:
        segment_id = work.segment.id
        try:
            await self._fold(work, by_model=True)
        except Exception as exc:
            if not self.fails_on(segment_id, exc, "segment"):
                raise
            await self._fold(work, by_model=False)
        else:
            self.succeeded(segment_id)

    async def _fold(self, work: SegmentWork, *, by_model: bool) -> None:
        """Fold the next exchange summaries in: by the model, or (`by_model=False`, the model gave no
        summary) by the rule of `verbatim_segment`."""
        now = self._clock.now()
        if not work.new:
            assert work.summary is not None  # _actionable: a rolling summary waiting to become final
            await self._work.log.mark_final(work.summary, work.segment, now)
            self.completed += 1
            self._on_final()
            return
        chunk = work.new[:FOLD_MAX]
        final = work.closed and not work.waiting and len(work.new) <= FOLD_MAX
        if by_model:
            answer, model = await self._work.summarize(
                segment_prompt(work.summary, chunk, self._work.max_input_tokens), SEGMENT_ANSWER_TOKENS
            )
            self.answered()
            text = clean_summary(answer, MAX_SEGMENT_CHARS)
        else:
            text, model = verbatim_segment(work.summary, chunk), VERBATIM_MODEL
        covered = (work.summary.exchanges_covered if work.summary is not None else 0) + len(chunk)
        covers = chunk[-1].exchange_id
        assert covers is not None  # chunk holds exchange summaries
        saved = await self._work.log.segment_summary(
            work.segment,
            text,
            model,
            final=final,
            covers_exchange_id=covers,
            exchanges_covered=covered,
            sources=[*chunk, *([work.summary] if work.summary is not None else [])],
            at=now,
        )
        if saved is None:  # something it retells was forgotten meanwhile: the next pass folds what is left
            log.info("segment %d changed while its summary was written; folded again", work.segment.id)
            return
        self.completed += 1
        log.debug("segment %d summary %s (%d exchange(s))", work.segment.id, "final" if final else "rolled", covered)
        if final:
            self._on_final()
