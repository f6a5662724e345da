"""What went into each chat's last turns: layers with token counts and auto-RAG hits with scores.

The web inspector shows these records for "any recent turn", `/context` the newest. They are kept
in memory only, per chat (the last `per_chat` turns of at most `max_chats` chats, least recently
active dropped first): they describe the running engine's decisions, everything they point at is in
the log and the database, and persisting them would write recalled message text a second time.
A record is slim on purpose (no copy of the whole prompt): recalled text is cut to
`RECALLED_TEXT_CHARS` so a Raspberry Pi keeps a few hundred records in well under a megabyte each.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from klaw.engine.context_builder import BuiltContext, ContextLayer
from klaw.engine.turn_timing import PhaseTimes
from klaw.store.records import ChatRef

RECALLED_TEXT_CHARS = 1000


@dataclass(frozen=True, slots=True)
class RecalledHit:
    """One auto-RAG hit as placed in the context, with how each retrieval side ranked it."""

    rowid: int
    message_id: str
    role: str
    created_at: datetime
    score: float
    distance: float | None
    fts_rank: int | None
    bm25: float | None
    text: str
    truncated: bool


@dataclass(frozen=True, slots=True)
class TurnContext:
    """One turn's context: when, which message it answered, with which model, and its layers."""

    at: datetime
    reply_to: str
    model: str
    segment_id: int
    budget: int
    layers: tuple[ContextLayer, ...]
    recalled: tuple[RecalledHit, ...]
    warnings: tuple[str, ...]
    # Seconds per phase; the same object the turn keeps filling after this record is made (the
    # model and the reply come after the context), so a reader sees the whole turn once it ended.
    timings: PhaseTimes = field(default_factory=PhaseTimes)

    @property
    def total_tokens(self) -> int:
        return sum(layer.tokens for layer in self.layers)

    @classmethod
    def of(
        cls,
        context: BuiltContext,
        *,
        at: datetime,
        reply_to: str,
        model: str,
        segment_id: int,
        timings: PhaseTimes | None = None,
    ) -> TurnContext:
        recalled = tuple(
            RecalledHit(
                rowid=r.hit.message.rowid,
                message_id=r.hit.message.record.id,
                role=r.hit.message.role.value,
                created_at=r.hit.message.record.created_at,
                score=r.hit.score,
                distance=r.hit.distance,
                fts_rank=r.hit.fts_rank,
                bm25=r.hit.bm25,
                text=r.text[:RECALLED_TEXT_CHARS],
                truncated=r.truncated or len(r.text) > RECALLED_TEXT_CHARS,
            )
            for r in context.recalled
        )
        return cls(
            at=at,
            reply_to=reply_to,
            model=model,
            segment_id=segment_id,
            budget=context.budget,
            layers=tuple(context.layers),
            recalled=recalled,
            warnings=tuple(context.warnings),
            timings=context.timings if timings is None else timings,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "reply_to": self.reply_to,
            "model": self.model,
            "segment_id": self.segment_id,
            "budget": self.budget,
            "total_tokens": self.total_tokens,
            "layers": [
                {
                    "name": layer.name,
                    "tokens": layer.tokens,
                    "items": layer.items,
                    "parts": [{"name": name, "tokens": tokens} for name, tokens in layer.parts],
                    **({"cut_from": layer.whole} if layer.whole else {}),
                }
                for layer in self.layers
            ],
            "recalled": [
                {
                    "rowid": hit.rowid,
                    "message_id": hit.message_id,
                    "role": hit.role,
                    "created_at": hit.created_at.isoformat(),
                    "score": hit.score,
                    "distance": hit.distance,
                    "fts_rank": hit.fts_rank,
                    "bm25": hit.bm25,
                    "text": hit.text,
                    "truncated": hit.truncated,
                }
                for hit in self.recalled
            ],
            "warnings": list(self.warnings),
            "timings_ms": self.timings.milliseconds(),
        }


class ContextHistory:
    def __init__(self, per_chat: int = 20, max_chats: int = 100) -> None:
        self._per_chat = per_chat
        self._max_chats = max_chats
        self._turns: OrderedDict[ChatRef, deque[TurnContext]] = OrderedDict()

    def record(self, chat: ChatRef, turn: TurnContext) -> None:
        turns = self._turns.pop(chat, None) or deque(maxlen=self._per_chat)
        turns.append(turn)
        self._turns[chat] = turns  # most recently active last
        while len(self._turns) > self._max_chats:
            self._turns.popitem(last=False)

    def drop(self, chat: ChatRef) -> None:
        """Forget the chat's records (`/forget`: recalled text must not outlive the forgotten messages)."""
        self._turns.pop(chat, None)

    def turns(self, chat: ChatRef) -> list[TurnContext]:
        """The chat's recorded turns, newest first."""
        return list(reversed(self._turns.get(chat, ())))

    def chats(self) -> list[ChatRef]:
        """Chats with recorded turns, most recently active first."""
        return list(reversed(self._turns))
