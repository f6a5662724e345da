"""Which messages get a vector: what a person said and what the agent answered, if long enough.

Only user text and the assistant's text replies carry meaning worth finding again by similarity.
Tool calls and tool results are machinery (arguments, JSON, file dumps) that would crowd real
conversation out of retrieval; system and control records (`/new`, `/model`) are never shown to
a model at all. Very short messages ("ok", "thanks") match everything and help nothing, hence
`min_tokens` (`autoRag.minMessageTokens`).
"""

from __future__ import annotations

from klaw.llm.tokens import approximate_token_count
from klaw.store.records import MessageRecord


def should_embed(record: MessageRecord, min_tokens: int) -> bool:
    """True for user and assistant text of at least `min_tokens` approximate tokens."""
    if not record.is_conversation:
        return False
    return approximate_token_count(record.content) >= min_tokens
