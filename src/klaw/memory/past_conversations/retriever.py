"""`PastConversationRetriever`: the past-conversations layer of a turn's context.

It runs the stage pipeline (`stages.py`) for the new message, with the settings in force now
(`engine.yaml` `rag:` overridden by `/rag`), and returns what it found with the block to place.
Whatever goes wrong (embedder down, store error), retrieval returns nothing and logs the error's
type, never the text: past conversations must never fail a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from klaw.config import RagConfig, SearchConfig
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.past_conversations.past_messages import DEFAULT_MAX_DISTANCE, PastMessages
from klaw.memory.past_conversations.pipeline import Pipeline, Retrieval
from klaw.memory.past_conversations.stages import (
    EmbedQuery,
    FormatBlock,
    PastSegmentsGuard,
    SimilarExchanges,
    SimilarSegments,
    UnknownNames,
)
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)


def default_pipeline(
    store: Storage,
    embedder: Embedder,
    search: SearchConfig | None = None,
    max_message_distance: float = DEFAULT_MAX_DISTANCE,
) -> Pipeline:
    """The stages in their default order; `search` and `max_message_distance` (auto-RAG's relevance
    threshold) are how the messages stage searches and judges past messages."""
    return Pipeline(
        [
            PastSegmentsGuard(store),
            UnknownNames(store),
            EmbedQuery(embedder),
            PastMessages(store, HybridSearch(store, embedder, search), max_message_distance),
            SimilarSegments(store),
            SimilarExchanges(store),
            FormatBlock(),
        ]
    )


class PastConversationRetriever:
    def __init__(
        self,
        store: Storage,
        embedder: Embedder,
        settings: Callable[[], RagConfig],
        *,
        pipeline: Pipeline | None = None,
        search: SearchConfig | None = None,
        max_message_distance: float = DEFAULT_MAX_DISTANCE,
    ) -> None:
        """`settings` gives the `rag` settings in force (read on every retrieval)."""
        self._settings = settings
        self.pipeline = pipeline or default_pipeline(store, embedder, search, max_message_distance)

    @property
    def enabled(self) -> bool:
        return self._settings().enabled

    async def retrieve(
        self, chat: ChatRef, current_segment_id: int, query: str, budget_tokens: int
    ) -> Retrieval | None:
        """Past segments and exchanges related to `query`, never from `current_segment_id`; None when
        disabled, when there is no room, and on any error."""
        settings = self._settings()
        if not settings.enabled or budget_tokens <= 0:
            return None
        start = Retrieval(chat, current_segment_id, query, settings, budget_tokens)
        try:
            result = await self.pipeline.run(start)
        except Exception as exc:
            log.warning("past-conversation retrieval failed (%s); the turn goes on without it", type(exc).__name__)
            return None
        log.debug(
            "past conversations: %d segment(s), %d exchange(s) found; %s",
            len(result.segments),
            len(result.exchanges),
            f"stopped at {result.skipped_by}" if result.skipped_by else f"{len(result.shown)} segment(s) shown",
        )
        return result
