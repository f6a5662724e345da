"""A chat written through `Ingestion` (log and database) the way the engine writes a turn.

Each `turn` appends what the processor and the tool loop append: the user message(s), the
`exchange_open` record, optional tool calls with their results and saved memories, the final reply
and the `exchange_close` record, one second apart. The log files are real, so forgetting and
`klaw reindex` can be checked against them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from klaw.config import EngineConfig
from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.store.archival_records import memory_saved_record
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role, StoredMessage

ME = ChatRef("console", "me")
OTHER = ChatRef("telegram", "other")
T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
DIM = 32


def config() -> EngineConfig:
    return EngineConfig.model_validate({"embedder": {"backend": "fake", "dim": DIM}})


@dataclass
class Turn:
    users: list[StoredMessage]
    opened: StoredMessage
    steps: list[StoredMessage]  # tool calls, tool results, saved memories
    final: StoredMessage | None
    closed: StoredMessage

    @property
    def all(self) -> list[StoredMessage]:
        return [*self.users, self.opened, *self.steps, *([self.final] if self.final else []), self.closed]


class ScriptedChat:
    def __init__(self, home: KlawHome, store: Storage, start: datetime = T0) -> None:
        self.ingestion = Ingestion(ConversationLog(home.conversations), store, min_embed_tokens=1)
        self.store = store
        self.now = start

    def tick(self, seconds: float = 1) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    async def accept(self, record: MessageRecord) -> StoredMessage:
        return await self.ingestion.accept(record)

    async def say(self, text: str, chat: ChatRef = ME) -> StoredMessage:
        return await self.accept(MessageRecord(chat, Role.USER, text, created_at=self.tick()))

    async def turn(
        self,
        *users: str,
        reply: str | None,
        chat: ChatRef = ME,
        tools: Sequence[tuple[str, str] | tuple[str, str, str]] = (),
        memories: Sequence[str] = (),
        pending: Sequence[StoredMessage] = (),
    ) -> Turn:
        """One exchange; `pending` are user messages already said (a burst); a None reply fails it.
        `tools` are (name, result) or (name, result, arguments JSON)."""
        said = [*pending, *[await self.say(text, chat) for text in users]]
        opened = await self.accept(exchange_open_record(chat, said[-1].record.id, self.tick()))
        steps = []
        for number, (name, result, *arguments) in enumerate(tools):
            call_id = f"call_{opened.record.id[:6]}_{number}"
            metadata = {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments[0] if arguments else "{}"}]}
            call = MessageRecord(
                chat, Role.ASSISTANT, "", type=MessageType.TOOL_CALL, created_at=self.tick(), metadata=metadata
            )
            steps.append(await self.accept(call))
            outcome = {"tool_call_id": call_id, "name": name, "is_error": False}
            answer = MessageRecord(
                chat, Role.TOOL, result, type=MessageType.TOOL_RESULT, created_at=self.tick(), metadata=outcome
            )
            steps.append(await self.accept(answer))
        for text in memories:
            steps.append(await self.accept(memory_saved_record(chat, text, self.tick())))
        final = None
        if reply is not None:
            final = await self.accept(MessageRecord(chat, Role.ASSISTANT, reply, created_at=self.tick()))
        status = ExchangeStatus.COMPLETED if final else ExchangeStatus.FAILED
        closed = await self.accept(
            exchange_close_record(opened.record, status, final.record.id if final else None, self.tick())
        )
        return Turn(said, opened, steps, final, closed)

    async def new_segment(self, chat: ChatRef = ME) -> StoredMessage:
        record = MessageRecord(chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=self.tick())
        return await self.accept(record)

    async def exchange_id(self, turn: Turn) -> int:
        exchanges = await self.store.exchanges.for_segment(turn.opened.segment_id)
        return next(e.id for e in exchanges if e.user_message_rowid == turn.users[-1].rowid)


def log_text(home: KlawHome) -> str:
    """Every log file of every chat, concatenated."""
    return "".join(p.read_text(encoding="utf-8") for p in sorted(Path(home.conversations).rglob("*.jsonl")))


def database_bytes(path: Path) -> bytes:
    """The database file and its WAL, as they are on disk."""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
