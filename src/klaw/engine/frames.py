"""The engine socket protocol: one frame per line of newline-delimited UTF-8 JSON, at most 1 MiB.

Gateways send `hello`, `inbound`, `command`, `query`, `ping` and `delivered`; the engine sends `ack`, `outbound`,
`delta`, `result`, `pong`, `shutdown` and `error`. Both sides use the same models and `decode_frame`, so the
gateway and the engine cannot drift apart on a field. Unknown extra fields are ignored so that a newer peer can
add fields without breaking an older one; a missing or ill-typed field is an `invalid_frame` error.

The engine says which version of the protocol it speaks in every `pong` (`protocol`, `PROTOCOL`); the gateway
pings right after its `hello`, so that pong is the hello's answer. A pong without it is from an engine older
than decision 535, protocol 1. A client that needs what a version brought reads it there and says "restart the
engine" instead of waiting for what an older engine ignores (an unknown field is ignored, not refused). The
versions: 1, every field up to decision 527's `hello` `watching` excluded; 2, `watching` (copies of a
channel's outbound frames) and `protocol` in the pong.

Error messages name the field and the problem and never quote the frame: a frame carries private
message text, and the error goes back over the wire and into logs. `FrameReader` splits a stream
into lines without letting an oversized one grow the buffer past the limit.
"""

from __future__ import annotations

import functools
import json
from asyncio import StreamReader
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from klaw import strict_json
from klaw.engine.reply_labels import origin_label as origin_label  # the channels' labels and lines,
from klaw.engine.reply_labels import task_label as task_label
from klaw.engine.reply_labels import unasked_label as unasked_label  # with the frames
from klaw.engine.tools_used import tools_before_failing as tools_before_failing
from klaw.engine.tools_used import tools_used as tools_used
from klaw.errors import KlawError
from klaw.message_text import LONE_SURROGATE
from klaw.scheduling.names import SUBAGENT_CHANNEL
from klaw.store.records import CHANNEL_NAME, chat_id_problem

PROTOCOL = 2
"""The protocol version this engine speaks, said in every `pong` (the module docstring lists what each added)."""
MAX_FRAME_BYTES = 1 << 20
"""The largest frame either side may send, counting the terminating newline."""
READ_CHUNK_BYTES = 64 * 1024

DISK_FULL: Literal["disk_full"] = "disk_full"
_FinalCode = Literal["frame_too_large", "malformed_json", "invalid_frame", "unknown_type", "refused", "other_text"]
ErrorCode = Literal[_FinalCode, "internal", "disk_full"]
"""`internal` (a transient fault: the engine stopping) is sent again a few times, `disk_full` while the home's
disk is full (freeing space is the fix, decision 488); any other code is final: the same frame would be refused
again, so a gateway gives up at once and tells the person `message`. `refused`: valid, its content not accepted;
`other_text`: its id is the chat's message with other words (the web page's 409, decision 503)."""
RETRYABLE_CODES: frozenset[str] = frozenset({"internal", DISK_FULL})
OutboundKind = Literal["reply", "notice", "error"]
NonEmptyStr = Annotated[str, Field(min_length=1)]


def _channel_name(value: str) -> str:
    if not CHANNEL_NAME.match(value):
        raise ValueError("a channel is 1-32 lowercase letters, digits or '-', starting with a letter")
    if value == SUBAGENT_CHANNEL:
        raise ValueError(f"the channel {SUBAGENT_CHANNEL!r} is reserved for scheduled tasks")
    return value


def _chat_id(value: str) -> str:
    problem = chat_id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _text(value: str) -> str:
    if not strict_json.is_text(value):
        raise ValueError(LONE_SURROGATE)
    return value


ChannelName = Annotated[str, AfterValidator(_channel_name)]
ChatId = Annotated[str, AfterValidator(_chat_id)]
Text = Annotated[str, AfterValidator(_text)]  # pydantic lets a lone surrogate through in some fields


class FrameError(KlawError, ValueError):
    """A line that is not a valid frame; `code`, `message` and `ref` become the `error` frame sent back.

    `message` never contains the frame's content, so `str()` is safe to log.
    """

    def __init__(self, code: ErrorCode, message: str, ref: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code: ErrorCode = code
        self.message = message
        self.ref = ref

    def to_frame(self) -> ErrorFrame:
        return ErrorFrame(code=self.code, message=self.message, ref=self.ref)


class _FrameModel(BaseModel):
    # Frozen: a frame is a message on the wire, not a mutable object. extra="ignore": forward compatibility.
    model_config = ConfigDict(frozen=True, extra="ignore")


# gateway → engine


class HelloFrame(_FrameModel):
    """The channels the gateway serves (their outbound frames are routed to it); `streaming`: those that want
    `delta` frames (the web page); `watching`: copies without serving them (a pipe beside a terminal, 527)."""

    type: Literal["hello"] = "hello"
    channels: list[NonEmptyStr]
    streaming: list[NonEmptyStr] = Field(default_factory=list)
    watching: list[NonEmptyStr] = Field(default_factory=list)


class InboundFrame(_FrameModel):
    """A message from a person. `id` is chosen by the gateway and stable across replays, for deduplication."""

    type: Literal["inbound"] = "inbound"
    id: NonEmptyStr
    channel: ChannelName
    chat_id: ChatId
    text: Text
    created_at: AwareDatetime | None = None
    sender: Text | None = None
    whole: bool = False  # no other message can join it (a piped `klaw chat`): no debounce (decision 520)


class CommandFrame(_FrameModel):
    """A slash command (`command` without the slash); acknowledged like an inbound message."""

    type: Literal["command"] = "command"
    id: NonEmptyStr
    channel: ChannelName
    chat_id: ChatId
    command: Annotated[Text, Field(min_length=1)]
    args: Text = ""
    text: Text = ""  # as typed: a skill's call is this message, its name's case and spaces kept (decision 536)


class DeliveredFrame(_FrameModel):
    """The channel has shown the reply whose `outbound` frames carried this `id` (all its parts); the
    engine stops keeping it to send again at its next start. Never answered."""

    type: Literal["delivered"] = "delivered"
    id: NonEmptyStr


class QueryFrame(_FrameModel):
    """A question to the engine (the web inspector's, mostly read-only; `cancel_turn`, `forget` act), answered
    by a `result` frame with the same id; a gateway never buffers or replays one (engine/queries.py)."""

    type: Literal["query"] = "query"
    id: NonEmptyStr
    query: NonEmptyStr
    params: dict[str, Any] = Field(default_factory=dict)


class PingFrame(_FrameModel):
    type: Literal["ping"] = "ping"
    id: str | None = None


# engine → gateway


class AckFrame(_FrameModel):
    """The inbound or command frame with this id is durably accepted; the gateway may drop its copy."""

    type: Literal["ack"] = "ack"
    id: NonEmptyStr


class OutboundFrame(_FrameModel):
    type: Literal["outbound"] = "outbound"
    channel: NonEmptyStr
    chat_id: NonEmptyStr
    text: str
    reply_to: str | None = None
    kind: OutboundKind = "reply"
    # The scheduled task whose answer this is (None: anything else), so a channel can label it. Optional.
    task: str | None = None
    spawned: bool = False  # the task is a one-off subagent run (`subagent_spawn`), labelled so (task_label)
    # A message the agent wrote in another chat (`message_send`): that chat ("web:main"), for `unasked_label`.
    sent_from: str | None = None
    # A turn's reply's record id: sent again after a restart until the gateway confirms it (`delivered`).
    id: str | None = None
    part: int = Field(default=0, ge=0)  # a reply too large for one frame: this part's index…
    parts: int = Field(default=1, ge=1)  # …of how many (frame_parts.py)
    # An approval question's id (engine/approval.py): a channel may offer approve/deny buttons that send
    # `/approve ID` or `/deny ID`; optional like `task`.
    approval: str | None = None
    # A turn's reply or apology: the ids of every message the turn answered (messages that arrived together
    # are answered in one turn; `reply_to` is the last of them), so a caller waiting for any of them finds
    # it (`POST /api/messages?wait=`). Empty for anything else; optional like `task`.
    answers: tuple[str, ...] = ()
    # A turn's reply: the tool calls the turn made, in order, so a channel can say what was used (the web
    # page lists them under the reply): one entry per run of calls to one tool ("file_read ×2"), bounded
    # (engine/tools_used.py: names cut, at most a dozen runs). Optional like `task`: a reply sent again
    # after a restart has none, and an older gateway ignores it.
    tools: tuple[str, ...] = ()
    # A notice that something of the chat was forgotten (`/forget`, `klaw memory forget`): a channel
    # keeping copies of the chat's messages (the web page's replayable events) drops them. Optional.
    forgotten: bool = False
    waited: bool = False  # queued while no gateway served the channel, sent at its hello (outbound_routes.py)
    origin: str | None = None  # where the message it answers came from (a pipe…: message_origins.py, 535)


class DeltaFrame(_FrameModel):
    """A piece of a reply as the model writes it, for a channel that asked for `streaming` in `hello`.

    Best effort: never queued; the complete text still follows as an `outbound` frame with the same
    `reply_to`, which is what a gateway should keep."""

    type: Literal["delta"] = "delta"
    channel: NonEmptyStr
    chat_id: NonEmptyStr
    text: str
    reply_to: str | None = None


class ResultFrame(_FrameModel):
    """The answer to a `query`: `data` (JSON) or `error` (a sentence for the person, never content)."""

    type: Literal["result"] = "result"
    id: NonEmptyStr
    data: Any = None
    error: str | None = None


class PongFrame(_FrameModel):
    """The answer to a `ping`, with the engine's protocol version (None: an engine before it was said, 1)."""

    type: Literal["pong"] = "pong"
    id: str | None = None
    protocol: int | None = None


class ShutdownFrame(_FrameModel):
    """The engine is going down; the gateway should buffer inbound messages until it reconnects."""

    type: Literal["shutdown"] = "shutdown"
    reason: str | None = None


class ErrorFrame(_FrameModel):
    """A frame could not be accepted; `ref` is the offending frame's id when it could be read."""

    type: Literal["error"] = "error"
    code: ErrorCode
    message: str
    ref: str | None = None


GatewayFrame = HelloFrame | InboundFrame | CommandFrame | QueryFrame | PingFrame | DeliveredFrame
EngineFrame = AckFrame | OutboundFrame | DeltaFrame | ResultFrame | PongFrame | ShutdownFrame | ErrorFrame
Frame = Annotated[GatewayFrame | EngineFrame, Field(discriminator="type")]

_MAX_REF_CHARS = 256  # an id longer than this is not echoed back: the error frame must stay small

FRAME_TYPES: frozenset[str] = frozenset(
    {
        *("hello", "inbound", "command", "query", "ping", "delivered"),
        *("ack", "outbound", "delta", "result", "pong", "shutdown", "error"),
    }
)


@functools.cache
def _frame_adapter() -> TypeAdapter[GatewayFrame | EngineFrame]:
    # Built on first use, not at import: building the validator is the costly part of pydantic.
    return TypeAdapter(Frame)


def encode_frame(frame: GatewayFrame | EngineFrame, *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """The frame as one line of compact JSON with its newline.

    Raises `FrameError("frame_too_large")` rather than emit a frame the peer must reject.
    """
    line = frame.model_dump_json().encode() + b"\n"
    if len(line) > max_bytes:
        raise FrameError("frame_too_large", f"{frame.type} frame of {len(line)} bytes exceeds {max_bytes} bytes")
    return line


def decode_frame(line: bytes, *, max_bytes: int = MAX_FRAME_BYTES) -> GatewayFrame | EngineFrame:
    """One line (with or without its newline) as a frame; raises `FrameError` saying what is wrong."""
    if len(line) > max_bytes:
        raise FrameError("frame_too_large", f"frame of {len(line)} bytes exceeds {max_bytes} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError("malformed_json", f"invalid UTF-8 at byte {exc.start}") from None
    try:
        data = json.loads(text, parse_constant=strict_json.reject_constant)
    except json.JSONDecodeError as exc:
        raise FrameError("malformed_json", strict_json.decode_problem(exc)) from None
    except (RecursionError, ValueError):  # nesting too deep; NaN/Infinity; integers too long to parse
        raise FrameError("malformed_json", "invalid JSON: value too deeply nested or not representable") from None
    if not isinstance(data, dict):
        raise FrameError("invalid_frame", f"a frame must be a JSON object, not {_json_kind(data)}")
    ref_id = data.get("id")
    # An id that is not text (a lone surrogate) cannot be echoed: the error frame could not be encoded.
    ref = (
        ref_id
        if isinstance(ref_id, str) and 0 < len(ref_id) <= _MAX_REF_CHARS and strict_json.is_text(ref_id)
        else None
    )
    problem = strict_json.find_problem(data)  # lone surrogates anywhere, nesting too deep for later steps
    if problem is not None:
        raise FrameError("invalid_frame", problem, ref)
    kind = data.get("type")
    if kind is None:
        raise FrameError("invalid_frame", "field 'type': Field required", ref)
    if not isinstance(kind, str):
        raise FrameError("invalid_frame", "field 'type': must be a string", ref)
    if kind not in FRAME_TYPES:
        shown = f" {kind!r}" if len(kind) <= 32 and kind.isprintable() else ""
        raise FrameError("unknown_type", f"unknown frame type{shown}", ref)
    try:
        return _frame_adapter().validate_python(data)
    except ValidationError as exc:
        raise FrameError("invalid_frame", describe_invalid(exc, kind), ref) from None


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a boolean" if isinstance(value, bool) else "a number"


def describe_invalid(exc: ValidationError, kind: str) -> str:
    """'field 'chat_id': Field required; ...' — pydantic's messages name the expectation, not the input."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False)[:3]:
        loc = list(error["loc"])
        if loc and loc[0] == kind:  # the discriminated union prefixes the tag
            loc = loc[1:]
        where = ".".join(str(part) for part in loc) or "frame"
        problems.append(f"field {where!r}: {error['msg']}")
    more = exc.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


class FrameReader:
    """Splits a stream into frame lines while holding at most `max_bytes` plus one chunk in memory;
    `held`, if given, hears how much it holds each time it waits for more (the engine's budget, socket_limits.py).

    Both ends need it. StreamReader.readline() fails on a long line in a way that leaves the stream
    awkward to resume; reading chunks lets an oversized line be reported once and skipped to its newline.
    """

    def __init__(
        self, reader: StreamReader, max_bytes: int = MAX_FRAME_BYTES, *, held: Callable[[int], None] | None = None
    ) -> None:
        self._reader = reader
        self._max = max_bytes
        self._held = held  # told how many bytes wait for their newline whenever it waits for more
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no newline
        self._discarding = False  # inside an oversized line already reported

    @property
    def mid_frame(self) -> bool:
        return bool(self._buf) or self._discarding

    async def next(self) -> bytes | int | None:
        """The next line with its newline; for an oversized line its size so far (an int); None at end of stream."""
        while True:
            end = self._buf.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                self._scanned = 0
                if self._discarding:
                    self._discarding = False
                    continue
                return len(line) if len(line) > self._max else line
            if self._discarding:
                self._buf.clear()
            elif len(self._buf) >= self._max:  # no newline yet, so the line with its newline exceeds the limit
                size = len(self._buf)
                self._buf.clear()
                self._discarding = True
                self._scanned = 0
                return size
            self._scanned = len(self._buf)
            if self._held is not None:
                self._held(len(self._buf))
            chunk = await self._reader.read(READ_CHUNK_BYTES)
            if not chunk:
                return None
            self._buf += chunk
