"""The storage protocol every backend implements (SQLite and PostgreSQL).

It is split into small repositories, one per concern, so each stays easy to read and to implement twice;
`Storage` bundles them with the lifecycle. Every method is async: backends run blocking calls off the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from klaw.store.archival_records import MemoryChunk, MemoryHit
from klaw.store.errors import IndexMismatchError as IndexMismatchError
from klaw.store.errors import StorageError as StorageError
from klaw.store.errors import StorageUnavailable as StorageUnavailable
from klaw.store.errors import StoreNotSetUp as StoreNotSetUp
from klaw.store.errors import embedder_mismatch as embedder_mismatch
from klaw.store.records import (
    ChatRef,
    Exchange,
    ExchangeStatus,
    MessageRecord,
    SearchHit,
    Segment,
    SessionState,
    StoredMessage,
    UndeliveredReply,
    WordCounts,
)
from klaw.store.send_protocol import SendRepository
from klaw.store.summaries.protocol import SummaryRepository
from klaw.store.work_protocol import ChatLeaseRepository, EmbeddingJobRepository

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True)
class StoreCounts:
    """What a store holds, for `klaw db info` and the reindex report."""

    messages: int  # conversation messages and tool steps (not control records)
    control_records: int  # /new, /model, exchanges, summaries, saved memories, forget tombstones
    chats: int
    segments: int
    sessions: int
    exchanges: int
    vectors: int  # message vectors
    embedding_pending: int
    embedding_failed: int
    embedding_errors: tuple[tuple[str, int], ...]  # (last error, jobs), most frequent first
    message_jobs: tuple[int, int] = (0, 0)  # (pending, failed) of the above for message vectors alone (488)


@dataclass(frozen=True)
class VectorIndex:
    """A vector index and the embedder that filled it (vectors of two embedders never mix)."""

    name: str
    embedder_id: str
    dim: int


# The record's log write (blocking: its lines written and fsync'd), run by `append` just before the row's
# transaction, on the thread the store runs that on: the log first, as always, in one hop with the row.
LogFirst = Callable[[], object]
RowsFor = Callable[[dict[int, list[tuple[int, int]]]], Collection[int] | None] | None  # `neighbours_with_rows`' keep


class MessageRepository(Protocol):
    async def append(
        self, record: MessageRecord, *, embed: bool = False, log_first: LogFirst | None = None
    ) -> StoredMessage:
        """Insert a message into the chat's current segment and return it with its rowid
        (the rowid links `messages`, `messages_fts` and `vec_messages`). Idempotent on
        `record.id`: appending an id that is already stored returns the stored message, so
        replaying the log after a crash never duplicates. A `session_break` record closes the
        chat's segment and opens a new one instead of inserting a message.

        With `embed`, a newly inserted message also gets an `embedding_jobs` row in the same
        transaction, so no crash can leave a message that should be embedded without its job.
        `log_first` runs before anything is written; if it raises, nothing is (decision 211)."""
        ...

    async def append_many(
        self,
        records: Sequence[MessageRecord],
        *,
        embed: Sequence[bool] | None = None,
        log_first: LogFirst | None = None,
    ) -> list[StoredMessage]:
        """`append` for several records in one transaction (reindex, imports); `embed[i]` is
        record i's `embed` flag (None: no jobs)."""
        ...

    async def get(self, message_id: str) -> StoredMessage | None: ...

    async def by_rowids(self, rowids: Sequence[int]) -> list[StoredMessage]: ...

    async def window(self, segment_id: int, limit: int) -> list[StoredMessage]:
        """The last `limit` messages of a segment, oldest first."""
        ...

    async def user_messages_after(self, segment_id: int, rowid: int) -> list[StoredMessage]:
        """The segment's user text messages stored after `rowid`, oldest first, however many: what a
        crash left unanswered (the window would show only the newest of them)."""
        ...

    async def unanswered(self) -> list[StoredMessage]: ...  # the above, every chat's open segment, one read (477)

    async def count_in_segment(self, segment_id: int, *, at_most: int | None = None) -> int:
        """The segment's messages a model may be shown (not control records); with `at_most`, counting
        stops there, so "does the segment hold more than N?" costs N rows, not the whole segment."""
        ...

    async def known_ids(self, chat: ChatRef, since: datetime) -> set[str]: ...  # created since `since` (recovery)

    async def latest_created_at(self, chat: ChatRef) -> datetime | None: ...


class SegmentRepository(Protocol):
    async def current(self, chat: ChatRef) -> Segment:
        """The chat's open segment, created on first use."""
        ...

    async def get(self, segment_id: int) -> Segment | None: ...

    async def open_among(self, segment_ids: Collection[int]) -> set[int]:
        """Those of `segment_ids` still open (closed or gone ones are left out), in one query however
        many: the exchange summarizer asks it for every segment with exchanges waiting, on each pass."""
        ...

    async def list(self, chat: ChatRef) -> list[Segment]: ...

    async def chats(self) -> Sequence[ChatRef]:
        """Every chat that has a segment, the one with the newest segment first (the inspector's list)."""
        ...


class SearchRepository(Protocol):
    async def full_text(
        self,
        chat: ChatRef,
        text: str,
        *,
        limit: int,
        segment_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before_segment_id: int | None = None,
        exclude: Collection[int] = (),
    ) -> list[SearchHit]:
        """Full-text search over the chat's messages. `text` is what a person typed: the backend
        turns it into a safe query (syntax characters never raise). Best first. Every search takes
        the same scope: one segment, the chat's segments before `before_segment_id` (its past
        conversations), a time range (`shared/search_scope.py`). The rowids in `exclude` are left out
        before the `limit` best are taken: the answer is the first `limit` of the others among the
        `limit + len(exclude)` best, so a caller need not read rows it would drop (a turn's window)."""
        ...

    async def nearest(
        self,
        chat: ChatRef,
        vector: npt.NDArray[np.float32],
        *,
        limit: int,
        segment_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before_segment_id: int | None = None,
        exclude: Collection[int] = (),
    ) -> list[SearchHit]:
        """K nearest messages by cosine distance (score = distance, lower is closer); `exclude` as
        `full_text` has it."""
        ...

    async def word_counts(
        self,
        chat: ChatRef,
        text: str,
        *,
        max_share: float,
        min_cap: int,
        segment_id: int | None = None,
        until: datetime | None = None,
        exclude: Sequence[int] = (),
        before_segment_id: int | None = None,
    ) -> WordCounts:
        """For each search word of `text` (as `full_text` reads it), how many conversation messages of
        the scope (less the rowids in `exclude`) hold it in their own text, and the scope's size.
        Counting stops past the cap, max(`min_cap`, `max_share` × the scope's size), so a common word
        costs little."""
        ...

    async def neighbours(self, messages: Sequence[StoredMessage], span: int) -> dict[int, list[tuple[int, int]]]:
        """For each message (by rowid), the rowids of the conversation messages (user or assistant
        text) of its own segment up to `span` such messages before and after it, each with its
        distance (1 = adjacent), nearest first. Tool calls, tool results and control records are
        skipped, not counted."""
        ...

    async def neighbours_with_rows(
        self, messages: Sequence[StoredMessage], span: int, *, exclude: Collection[int] = (), keep: RowsFor = None
    ) -> tuple[dict[int, list[tuple[int, int]]], list[StoredMessage]]:
        """`neighbours`, and the messages it names that are neither among `messages` nor in `exclude` (only those
        `keep` names, if given: it sees what `neighbours` found, once, where the store reads; None: all), read in
        the same call: a search ranks those by their text (one round trip instead of two; decision 470)."""
        ...


class VectorRepository(Protocol):
    async def bind_embedder(self, embedder_id: str, dim: int) -> None:
        """Record the embedder for the message vector table, creating it on first use.
        Raises `IndexMismatchError` if vectors of another embedder or size are stored."""
        ...

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        """Store message vectors by rowid (existing ones are kept). Returns how many were new."""
        ...

    async def count(self) -> int: ...

    async def bound_embedder(self) -> VectorIndex | None:
        """The embedder the message vectors come from; None before any is bound."""
        ...


class SettingsRepository(Protocol):
    async def get(self, key: str) -> Any | None: ...

    async def set(self, key: str, value: Any) -> None: ...

    async def delete(self, key: str) -> None: ...


class SessionRepository(Protocol):
    async def get(self, chat: ChatRef) -> SessionState | None: ...

    async def save(self, chat: ChatRef, model: str, at: datetime) -> None: ...


class ExchangeRepository(Protocol):
    async def open(self, chat: ChatRef, segment_id: int, user_message_rowid: int | None, at: datetime) -> Exchange: ...

    async def close(
        self, exchange_id: int, status: ExchangeStatus, final_message_rowid: int | None, at: datetime
    ) -> None: ...

    async def get(self, exchange_id: int) -> Exchange | None: ...

    async def for_segment(self, segment_id: int) -> list[Exchange]: ...

    async def reserve_id(self) -> int:
        """A new exchange id, never given out before (not even to an exchange since forgotten), for the
        `exchange_open` record about to be logged (docs/decisions/100-stable-exchange-ids.md)."""
        ...

    async def high_water(self) -> int:
        """The highest exchange id ever given out or reserved; a `forget` tombstone remembers it."""
        ...

    async def undelivered(self) -> list[UndeliveredReply]:
        """Final replies of closed exchanges no channel has confirmed showing, oldest first
        (docs/decisions/101-reply-redelivery.md)."""
        ...

    async def mark_delivered(self, record_ids: Sequence[str]) -> int:
        """The replies with these record ids were shown (or are given up); returns how many were pending."""
        ...


class MemoryChunkRepository(Protocol):
    """Archival memory (`memory_chunks`): written only by folding `memory_saved` log records."""

    async def bind_embedder(self, embedder_id: str, dim: int) -> None:
        """Record the embedder for the memory vector table, creating it on first use.
        Raises `IndexMismatchError` if vectors of another embedder or size are stored."""
        ...

    async def get(self, rowid: int) -> MemoryChunk | None: ...

    # memories (of `chat`, or of any chat) whose record id starts with `prefix`, any case, oldest first
    async def with_id(self, prefix: str, chat: ChatRef | None, *, limit: int) -> list[MemoryChunk]: ...

    async def find(self, chat: ChatRef, content: str) -> MemoryChunk | None: ...  # the chat's, with exactly this text

    async def latest(self, chat: ChatRef, limit: int) -> list[MemoryChunk]: ...  # newest first, for `/memory`

    async def texts(self, rowids: Sequence[int]) -> dict[int, str]: ...

    async def count(self, chat: ChatRef | None = None) -> int: ...

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int: ...

    async def full_text(self, chat: ChatRef, text: str, *, limit: int) -> list[MemoryHit]: ...  # bm25: lower is better

    async def nearest(self, chat: ChatRef, vector: npt.NDArray[np.float32], *, limit: int) -> list[MemoryHit]:
        """The chat's memories nearest to `vector` (cosine distance), closest first."""
        ...


class HistoryRepository(Protocol):
    """Which stored records make up an exchange or a segment (details and forgetting)."""

    async def exchange_messages(self, exchange_id: int) -> list[StoredMessage] | None:
        """Every record of the exchange, control records included, oldest first; None if unknown."""
        ...

    async def segment_messages(self, segment_id: int) -> list[StoredMessage]:
        """Every record of the segment except `/new` and `/model` records, oldest first."""
        ...

    async def summary_records(self, chat: ChatRef, record_ids: Sequence[str]) -> list[StoredMessage]:
        """The chat's summary records (every version) that forgetting `record_ids` makes obsolete: the
        summaries of the exchanges holding them and of their segments. `/forget` erases them too."""
        ...

    async def exchange_ids(self, messages: Sequence[StoredMessage]) -> dict[int, int]:
        """message rowid → exchange id, for user messages and final replies that belong to one."""
        ...

    async def tool_rounds(self, chat: ChatRef, tool_name: str) -> list[list[StoredMessage]]:
        """Each tool-call record of the chat calling `tool_name`, followed by the results of its calls."""
        ...

    async def latest_exchange_id(self, chat: ChatRef) -> int | None: ...

    async def checkpoint(self) -> None:
        """Make deleted data leave every file of the store (e.g. the SQLite WAL)."""
        ...


class Storage(Protocol):
    """A whole store. Repositories are read-only properties, so implementations may expose their
    concrete repository classes."""

    @property
    def messages(self) -> MessageRepository: ...

    @property
    def segments(self) -> SegmentRepository: ...

    @property
    def search(self) -> SearchRepository: ...

    @property
    def vectors(self) -> VectorRepository: ...

    @property
    def embedding_jobs(self) -> EmbeddingJobRepository: ...

    @property
    def settings(self) -> SettingsRepository: ...

    @property
    def sessions(self) -> SessionRepository: ...

    @property
    def exchanges(self) -> ExchangeRepository: ...

    @property
    def memory_chunks(self) -> MemoryChunkRepository: ...

    @property
    def history(self) -> HistoryRepository: ...

    @property
    def summaries(self) -> SummaryRepository: ...

    @property
    def sends(self) -> SendRepository: ...  # message_send's places per target chat (decision 418)

    @property
    def leases(self) -> ChatLeaseRepository | None:
        """Chat leases when several engines may share the store (PostgreSQL); None when one engine owns
        it (SQLite: the file is opened by one process)."""
        ...

    @property
    def keeps_log(self) -> bool:
        """Whether the store holds the conversation log itself (PostgreSQL's `log_records`, written by each
        append; docs/decisions/132-log-with-several-engines.md) instead of JSONL files in KLAW_HOME."""
        ...

    async def schema_version(self) -> int: ...

    async def counts(self) -> StoreCounts: ...

    async def vector_indexes(self) -> list[VectorIndex]:
        """Every vector index bound to an embedder (messages, saved memories, summaries)."""
        ...

    def stopping(self) -> None:
        """The engine begins to close: a store on a server stops waiting for one it cannot reach."""
        ...

    async def aclose(self) -> None: ...
