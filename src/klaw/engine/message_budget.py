"""What to tell a person whose message alone is over the model's context budget (a 58 KB paste to an
8192-token model): it goes to the model far over budget, which cuts it or fails, and the screen only
said "(klaw logged a warning: see …)". The sentence gives the estimate against the budget (the context
builder's, with its safety margin) and the way out: a workspace file the agent reads in parts.

The engine says it in the chat, as a notice, when the turn's context is built and before the model is
asked (engine/processor.py): the same words on the web page, on Telegram and in `klaw chat` (decision
285). Before, only `klaw chat` said it, from its own check; the other channels only logged a warning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from klaw.engine.context_builder import MESSAGE_OVERHEAD_TOKENS, SAFETY_MARGIN
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.tokens import approximate_token_count
from klaw.store.records import StoredMessage

OverBudget = Callable[[Sequence[StoredMessage], str], str | None]  # (a turn's messages, model) → the note


def no_note(_pending: Sequence[StoredMessage], _model: str) -> None:
    """An `OverBudget` that never says anything (a processor built without a catalogue)."""


def turn_note(pending: Sequence[StoredMessage], model: str, catalogue: ModelCatalogue, workspace: Path) -> str | None:
    """`over_budget_note` for a turn's messages, joined as the context builder joins them."""
    return over_budget_note("\n".join(m.content for m in pending), model, catalogue, workspace, len(pending))


def over_budget_note(
    text: str, model: str, catalogue: ModelCatalogue, workspace: Path, messages: int = 1
) -> str | None:
    """The note when `text` alone (the turn's `messages`, joined as the context builder joins them) is
    over `model`'s budget, else None."""
    tokens = approximate_token_count(text) + MESSAGE_OVERHEAD_TOKENS
    budget = int(catalogue.context_budget(model) * SAFETY_MARGIN)
    if tokens <= budget:
        return None
    these = "This message is" if messages == 1 else f"These {messages} messages are"
    return (
        f"{these} ~{_thousands(tokens)} tokens, over the {_thousands(budget)}-token budget of {model}"
        " (its contextBudget, less a 10% margin): the model gets it far over budget and may cut it short or"
        f" fail. For long text, save it as a file in the workspace ({workspace}) and ask about the file:"
        " the agent reads it in parts (file_read)."
    )


def _thousands(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)
