"""Sessions: a chat's live state (model, current segment), created on first contact.

Changes go through the conversation log as control records (`session_break` for `/new`,
`model_switch` for `/model`), so a lost database is rebuilt with the same segments and models.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from klaw.engine.clock import Clock
from klaw.llm.catalogue import ModelCatalogue
from klaw.memory.ingestion import Ingestion
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role, Segment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Session:
    chat: ChatRef
    model: str
    segment: Segment


def model_in_force(catalogue: ModelCatalogue, chosen: str | None) -> str:
    """The model a chat uses: the one it chose with /model while that is still configured, else
    routing.default. The one rule, shared with `klaw chat`'s banner and start-up check."""
    return chosen if chosen is not None and chosen in catalogue else catalogue.routing.default


class SessionManager:
    def __init__(self, catalogue: ModelCatalogue, store: Storage, ingestion: Ingestion, clock: Clock) -> None:
        self._catalogue = catalogue
        self._store = store
        self._ingestion = ingestion
        self._clock = clock

    async def get_or_create(self, chat: ChatRef) -> Session:
        # A chat follows routing.default until someone picks a model with /model (a model_switch
        # record); so editing routing.default reaches every chat that never chose.
        return Session(chat, await self.model_of(chat), await self._store.segments.current(chat))

    async def model_of(self, chat: ChatRef) -> str:
        """The model the chat's next turn uses (nothing created: a banner may ask before any message)."""
        state = await self._store.sessions.get(chat)
        model = model_in_force(self._catalogue, state.model if state else None)
        if state is not None and state.model != model:
            log.warning("chat %s used model %r, which is no longer configured; using %r", chat, state.model, model)
        return model

    async def switch_model(self, chat: ChatRef, model_id: str, record_id: str | None = None) -> Session:
        """`/model <id>` (`UnknownModelError` for an id that is not configured). `record_id` (the
        command's message id, when a gateway sent one) makes a replayed command a no-op, as replayed
        messages are."""
        self._catalogue.check(model_id)
        record = MessageRecord(
            chat,
            Role.SYSTEM,
            "",
            type=MessageType.MODEL_SWITCH,
            created_at=self._clock.now(),
            metadata={"model": model_id},
        )
        await self._accept_once(record, record_id)
        return await self.get_or_create(chat)

    async def new_segment(self, chat: ChatRef, record_id: str | None = None) -> Session:
        """`/new`: close the current segment (a session_break in the log) and start the next.
        A replayed `/new` (same `record_id`) does not close a second segment."""
        record = MessageRecord(chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=self._clock.now())
        await self._accept_once(record, record_id)
        return await self.get_or_create(chat)

    async def _accept_once(self, record: MessageRecord, record_id: str | None) -> None:
        if record_id is None:
            await self._ingestion.accept(record)
        else:
            await self._ingestion.accept_once(dataclasses.replace(record, id=record_id))
