"""Summary texts by segment or exchange id: what `fetch_conversation_details` shows beside a transcript."""

from __future__ import annotations

from klaw.store.summaries.protocol import SummaryRepository


class SummaryTexts:
    """`memory.conversation_details.SummarySource` over the summary repository (absent: None)."""

    def __init__(self, summaries: SummaryRepository) -> None:
        self._summaries = summaries

    async def segment_summary(self, segment_id: int) -> str | None:
        summary = await self._summaries.segment_summary(segment_id)
        return None if summary is None else summary.text

    async def exchange_summary(self, exchange_id: int) -> str | None:
        summary = await self._summaries.exchange_summary(exchange_id)
        return None if summary is None else summary.text
