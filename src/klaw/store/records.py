"""The values that cross the storage boundary: what the log holds and what the stores return.

They are plain frozen dataclasses (not ORM rows) so the SQLite and PostgreSQL stores, the
conversation log and the engine all speak the same types without importing each other.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import quote

CHANNEL_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
MAX_CHAT_ID_CHARS = 128
MAX_ROW_ID = 2**63 - 1
"""The largest id a store holds (SQLite's integer, PostgreSQL's bigint): a segment's, an exchange's, a
row's. A larger number cannot even be looked up (the drivers raise OverflowError), so every id a person
or a model gives is checked against it first: the web API's queries, the memory tools, `/forget`."""
# A chat's log directory is `<channel>_<percent-encoded chat id>`; file systems allow 255 bytes per name.
MAX_CHAT_ID_ENCODED_BYTES = 200


def chat_id_problem(chat_id: str) -> str | None:
    """Why `chat_id` cannot name a chat (a sentence for the sender, never quoting it), or None.

    Checked where chat ids come in (socket frames), so a bad one is refused at once instead of
    failing later where its log directory is created."""
    if not chat_id:
        return "the chat id is empty"
    if len(chat_id) > MAX_CHAT_ID_CHARS:
        return f"the chat id has {len(chat_id)} characters; at most {MAX_CHAT_ID_CHARS} are allowed"
    if not chat_id.isprintable():
        return "the chat id holds control, line-break or invalid characters; use printable text"
    encoded = len(_encoded_chat_id(chat_id))
    if encoded > MAX_CHAT_ID_ENCODED_BYTES:
        return (
            f"the chat id takes {encoded} bytes in its log directory's name (non-ASCII characters take 9 each);"
            f" at most {MAX_CHAT_ID_ENCODED_BYTES} are allowed"
        )
    return None


def _encoded_chat_id(chat_id: str) -> str:
    return quote(chat_id, safe="-.@+=").replace("%2E", ".")


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class MessageType(StrEnum):
    TEXT = "text"
    TOOL_CALL = "tool_call"  # an assistant message that asks for tool calls
    TOOL_RESULT = "tool_result"
    SESSION_BREAK = "session_break"  # `/new`: closes the chat's segment and opens the next
    MODEL_SWITCH = "model_switch"  # `/model <id>`: metadata {"model": id}; rebuilds sessions from the log
    EXCHANGE_OPEN = "exchange_open"  # a turn starts; rebuilds `exchanges` from the log (store/exchange_records.py)
    EXCHANGE_CLOSE = "exchange_close"  # a turn ends: status and final reply (store/exchange_records.py)
    MEMORY_SAVED = "memory_saved"  # memory_save: the text of one archival memory (store/archival_records.py)
    FORGET = "forget"  # tombstone: metadata lists the ids of forgotten records, never their text
    EXCHANGE_SUMMARY = "exchange_summary"  # a summarizer's summary of one exchange (store/summaries/log_records.py)
    SEGMENT_SUMMARY = "segment_summary"  # a segment's rolling or final summary (store/summaries/log_records.py)

    @property
    def is_control(self) -> bool:
        """Control records change chat state; they are logged and stored but never shown to a model,
        searched or embedded."""
        return self in _CONTROL


# A set, not a tuple of members spelt out at each call: reading an enum member off its class costs
# ~0.7 µs on Python 3.11, and every record a search, the window or ingestion looks at is classified
# (decision 254).
_CONTROL = frozenset(
    {
        MessageType.SESSION_BREAK,
        MessageType.MODEL_SWITCH,
        MessageType.EXCHANGE_OPEN,
        MessageType.EXCHANGE_CLOSE,
        MessageType.MEMORY_SAVED,
        MessageType.FORGET,
        MessageType.EXCHANGE_SUMMARY,
        MessageType.SEGMENT_SUMMARY,
    }
)


CONTROL_TYPES = tuple(t.value for t in MessageType if t.is_control)
TOOL_TYPES = (MessageType.TOOL_CALL.value, MessageType.TOOL_RESULT.value)
CONVERSATION_ROLES = (Role.USER.value, Role.ASSISTANT.value)


class RecordKind(StrEnum):
    """What a record is to the rest of klaw. `MessageRecord.kind` derives it from type and role, and
    every "is this a conversation message?" asks it (the SQLite queries use the same rule in SQL:
    `store/sqlite/record_kinds.py`, checked against this one by a test), so a new record type is
    classified once."""

    USER_MESSAGE = "user_message"  # text a person wrote
    REPLY = "reply"  # text the agent answered
    TOOL_STEP = "tool_step"  # a tool call or a tool's result: how the agent got to its reply
    CONTROL = "control"  # changes chat state (`MessageType.is_control`); never shown to a model
    OTHER = "other"  # text of another role (system, tool): klaw writes none; kept, shown to no model

    @property
    def is_conversation(self) -> bool:
        """What the person and the agent said to each other: searched, embedded, summarized."""
        return self in _CONVERSATION


_CONVERSATION = frozenset({RecordKind.USER_MESSAGE, RecordKind.REPLY})


def record_kind(type_: MessageType, role: Role) -> RecordKind:
    """The rule below, looked up: every (type, role) pair is classified once, at import (decision 254)."""
    return _KINDS.get((type_, role)) or _classify(type_, role)


def _classify(type_: MessageType, role: Role) -> RecordKind:
    if type_.is_control:
        return RecordKind.CONTROL
    if type_.value in TOOL_TYPES:
        return RecordKind.TOOL_STEP
    if role is Role.USER:
        return RecordKind.USER_MESSAGE
    if role is Role.ASSISTANT:
        return RecordKind.REPLY
    return RecordKind.OTHER


_KINDS = {(type_, role): _classify(type_, role) for type_ in MessageType for role in Role}


@dataclass(frozen=True, slots=True)
class ChatRef:
    """One conversation partner on one channel."""

    channel: str
    chat_id: str

    def __post_init__(self) -> None:
        if not CHANNEL_NAME.match(self.channel):
            raise ValueError(f"channel name {self.channel!r} is invalid: use 1-32 lowercase letters, digits or '-'")
        if not self.chat_id:
            raise ValueError("chat_id must not be empty")
        if len(_encoded_chat_id(self.chat_id)) > MAX_CHAT_ID_ENCODED_BYTES:
            raise ValueError(chat_id_problem(self.chat_id))

    @property
    def log_dir_name(self) -> str:
        """Directory name under conversations/: `<channel>_<chat_id>`, with the id percent-encoded
        so that no chat id (containing '/', '..', spaces…) can escape or collide."""
        return f"{self.channel}_{_encoded_chat_id(self.chat_id)}"

    def __str__(self) -> str:
        return f"{self.channel}:{self.chat_id}"


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_message_id() -> str:
    return uuid.uuid4().hex


def to_utc_millis(moment: datetime) -> datetime:
    """`moment` in UTC, truncated to whole milliseconds (what the log and the database keep)."""
    if moment.tzinfo is UTC and moment.microsecond % 1000 == 0:
        return moment  # already so (every record read back from the database or the log)
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    moment = moment.astimezone(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def to_millis(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_millis(millis: int) -> datetime:
    """Exact integer arithmetic: float seconds would round some milliseconds off by one. Positional
    seconds and microseconds: a third of the time of `timedelta(milliseconds=...)`, per row read."""
    seconds, rest = divmod(millis, 1000)
    return _EPOCH + timedelta(0, seconds, rest * 1000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One line of the conversation log, and one row of `messages` once ingested."""

    chat: ChatRef
    role: Role
    content: str
    type: MessageType = MessageType.TEXT
    id: str = field(default_factory=new_message_id)
    created_at: datetime = field(default_factory=utc_now)
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # The log and the database keep milliseconds in UTC; normalising here makes a record equal
        # to itself after a round trip through either.
        object.__setattr__(self, "created_at", to_utc_millis(self.created_at))

    @property
    def kind(self) -> RecordKind:
        return record_kind(self.type, self.role)

    @property
    def is_conversation(self) -> bool:
        """User or assistant text: what the person and the agent said to each other."""
        return self.kind.is_conversation

    @property
    def is_control(self) -> bool:
        """A state change (`/new`, `/model`, exchanges, summaries, saved memories, forgetting)."""
        return self.type.is_control


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the database holds it: the record plus its rowid and segment."""

    rowid: int
    segment_id: int
    record: MessageRecord

    @property
    def role(self) -> Role:
        return self.record.role

    @property
    def content(self) -> str:
        return self.record.content

    @property
    def kind(self) -> RecordKind:
        return self.record.kind

    @property
    def is_conversation(self) -> bool:
        return self.record.is_conversation


@dataclass(frozen=True, slots=True)
class Segment:
    """The part of a chat since the last `/new`."""

    id: int
    chat: ChatRef
    started_at: datetime
    ended_at: datetime | None = None


class ExchangeStatus(StrEnum):
    OPEN = "open"
    COMPLETED = "completed"
    FAILED = "failed"
    TOOL_LIMIT = "tool_limit"
    # Cut off by a crash (kill -9, power loss) while it ran: closed so at the next turn of its chat, which
    # answers its messages again. Not an answer: its messages stay unanswered (decision 306).
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class Exchange:
    """One user turn and everything up to the agent's final reply."""

    id: int
    chat: ChatRef
    segment_id: int
    started_at: datetime
    status: ExchangeStatus
    user_message_rowid: int | None
    final_message_rowid: int | None = None
    ended_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the database keeps of a chat's session: its model (the segment lives in `segments`)."""

    chat: ChatRef
    model: str
    updated_at: datetime


MESSAGE_TARGET = "message"  # an embedding job whose target_rowid is a messages.rowid (vec_messages)
MEMORY_TARGET = "memory"  # an embedding job whose target_rowid is a memory_chunks.rowid (vec_memory)


class EmbeddingJobStatus(StrEnum):
    PENDING = "pending"
    FAILED = "failed"  # gave up after the last backoff step; kept, counted and retried on request


@dataclass(frozen=True, slots=True)
class EmbeddingJob:
    """One row of the durable embedding queue: something to embed, identified by target and rowid.

    `target` names the table the vector belongs to (`MESSAGE_TARGET` now; summaries later);
    `attempts` counts failed tries; `last_error` is an error class and short reason, never content.
    """

    id: int
    target: str
    target_rowid: int
    status: EmbeddingJobStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job taken by `claim_texts`, with the text its target holds now, read in the claim's own call
    (one trip to the store a batch instead of two); None when the target row is gone or no longer
    to be embedded (a message forgotten, a summary rolled back to non-final): nothing to embed."""

    job: EmbeddingJob
    text: str | None


@dataclass(frozen=True, slots=True)
class EmbeddingJobCounts:
    pending: int
    failed: int


@dataclass(frozen=True, slots=True)
class TargetJobCounts:
    """Jobs of one target (`/embeddings status`); `last_error` is the newest failed job's error."""

    target: str
    pending: int
    failed: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class WordCounts:
    """How telling a query's words are in a scope: `messages` is the number of conversation messages
    in it, `counts[word]` how many of them hold the word in their own text (capped: a value over the
    cap asked for only means "more than the cap")."""

    messages: int
    counts: dict[str, int]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A message found by a search, with the backend's own score (bm25 rank or cosine distance)."""

    message: StoredMessage
    score: float


@dataclass(frozen=True, slots=True)
class UndeliveredReply:
    """A turn's final reply no channel has confirmed showing yet (sent again when the engine starts)."""

    reply: MessageRecord
    reply_to: str | None  # the id of the user message it answers (the gateway's frame id)
