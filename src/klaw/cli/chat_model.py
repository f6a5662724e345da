"""Which model `klaw chat`'s console chat will use, before the engine starts: the one it chose with
/model (a person's choice outlives the process), else routing.default. The start-up check and the
banner are about that model, not routing.default alone."""

from __future__ import annotations

from dataclasses import dataclass

from klaw.config import EngineConfig
from klaw.home import KlawHome
from klaw.llm.catalogue import ModelCatalogue
from klaw.store.records import ChatRef


@dataclass(frozen=True)
class ChatModel:
    model_id: str
    chosen: bool  # picked with /model, rather than following routing.default


async def chat_model(home: KlawHome, config: EngineConfig, chat: ChatRef) -> ChatModel:
    """The chat's model as the engine will resolve it (`model_in_force`). A store that cannot be opened
    here answers routing.default: starting the engine then names what is wrong with it."""
    catalogue = ModelCatalogue.from_config(config)
    default = ChatModel(config.routing.default, chosen=False)
    if config.database.backend == "sqlite" and not home.database_file(config.database.path).exists():
        return default  # a new home: nothing was chosen yet, and nothing is created before the engine does
    # Only for a store to read: the store's modules load numpy and the engine's sessions (decision 378).
    from klaw.engine.sessions import model_in_force
    from klaw.store.backend import open_storage

    try:
        store = await open_storage(home.database_file(config.database.path), config.database)
        try:
            state = await store.sessions.get(chat)
        finally:
            await store.aclose()
    except Exception:  # the engine's start opens the same store next, and names what is wrong with it
        return default
    model = model_in_force(catalogue, state.model if state else None)
    return ChatModel(model, chosen=model != config.routing.default)
