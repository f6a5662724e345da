"""Reading a LoCoMo-format file: conversations, their dated sessions of turns, and scorable questions.

The format is LoCoMo's `locomo10.json` (Maharana et al., ACL 2024): a list of conversations, each
with `session_<n>` turn lists, `session_<n>_date_time` strings and a `qa` list whose `evidence`
names the turns (`dia_id`) that hold the answer. The bench must run unchanged on any file of that
format (a held-out split is measured with the same code), so everything the bench relies on is
checked here, and a file that breaks the format fails with an error naming where and what — never
a KeyError deep inside the run.

Evidence ids are normalised as `bench/data/README.md` §1 recommends: strip parentheses, split on
`;`, `,` and whitespace, read `D:11:26` as `D11:26`, drop leading zeros of the turn number, then
keep only ids that exist in the conversation. A question left without any valid id cannot be
scored; it is skipped and counted, not given a free recall of 1 (LoCoMo's own scorer does that).
Error messages name keys, positions and types, never the conversation text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from klaw.errors import KlawError

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_SEPARATORS = re.compile(r"[;,\s]+")
_EVIDENCE_ID = re.compile(r"^D:?(\d+):(\d+)$")
_SESSION_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})\s*$", re.IGNORECASE
)
_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}


class LocomoFormatError(KlawError, ValueError):
    """The file is not LoCoMo-format; the message says where and what."""


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    blip_caption: str | None = None

    @property
    def message_text(self) -> str:
        """What the bench stores: `"<speaker>: <text>"`, plus `" [shares <caption>]"` for an image."""
        shared = f" [shares {self.blip_caption}]" if self.blip_caption else ""
        return f"{self.speaker}: {self.text}{shared}"


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    started_at: datetime  # UTC; the file gives local times without a zone
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    """A scorable question: `evidence` holds normalised, existing, distinct turn ids (never empty)."""

    index: int  # position in the conversation's `qa` list
    text: str
    category: int
    evidence: tuple[str, ...]
    unresolved: tuple[str, ...] = ()  # evidence tokens that name no turn (dropped)


@dataclass(frozen=True, slots=True)
class SkippedQuestion:
    """A question with no valid evidence id, left out of every mean."""

    index: int
    category: int
    unresolved: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    skipped: tuple[SkippedQuestion, ...]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]

    def session_of(self) -> dict[str, int]:
        """Turn id → the number of the session that holds it."""
        return {turn.dia_id: session.number for session in self.sessions for turn in session.turns}


@dataclass(frozen=True, slots=True)
class DataSource:
    name: str
    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class LocomoDataset:
    source: DataSource
    conversations: tuple[Conversation, ...]

    @property
    def turn_count(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    @property
    def question_count(self) -> int:
        return sum(len(c.questions) for c in self.conversations)


def load_locomo(path: Path) -> LocomoDataset:
    """Read and check the file at `path`; raises `LocomoFormatError` (or OSError) when it cannot be used."""
    raw = path.read_bytes()
    source = DataSource(path.name, len(raw), hashlib.sha256(raw).hexdigest())
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LocomoFormatError(f"{path.name}: not JSON ({exc})") from None
    return parse_locomo(data, source)


def parse_locomo(data: Any, source: DataSource) -> LocomoDataset:
    where = source.name
    if not isinstance(data, list) or not data:
        raise LocomoFormatError(f"{where}: the top level must be a non-empty list of conversations")
    conversations: list[Conversation] = []
    seen: set[str] = set()
    for position, item in enumerate(data):
        conversation = _conversation(item, f"{where}: conversation [{position}]")
        if conversation.sample_id in seen:
            raise LocomoFormatError(f"{where}: sample_id {conversation.sample_id!r} appears twice")
        seen.add(conversation.sample_id)
        conversations.append(conversation)
    return LocomoDataset(source, tuple(conversations))


def parse_session_date(text: str) -> datetime:
    """`"1:56 pm on 8 May, 2023"` → 2023-05-08 13:56 UTC; ValueError when it is not that shape."""
    match = _SESSION_DATE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not like '1:56 pm on 8 May, 2023'")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None or not 1 <= int(hour) <= 12:
        raise ValueError(f"{text!r} is not like '1:56 pm on 8 May, 2023'")
    hour_24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=UTC)


def normalise_evidence(raw: Sequence[object], known: Collection[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(valid ids in first-seen order without duplicates, tokens that name no turn)."""
    valid: list[str] = []
    unresolved: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            unresolved.append(repr(item))
            continue
        for token in _EVIDENCE_SEPARATORS.split(item.replace("(", "").replace(")", "")):
            if not token:
                continue
            match = _EVIDENCE_ID.match(token)
            candidate = f"D{match.group(1)}:{int(match.group(2))}" if match else token
            if candidate in known:
                if candidate not in valid:
                    valid.append(candidate)
            else:
                unresolved.append(token)
    return tuple(valid), tuple(unresolved)


def _conversation(item: Any, where: str) -> Conversation:
    if not isinstance(item, Mapping):
        raise LocomoFormatError(f"{where}: must be an object, got {type(item).__name__}")
    sample_id = item.get("sample_id")
    if not isinstance(sample_id, str) or not sample_id.strip():
        raise LocomoFormatError(f"{where}: 'sample_id' must be a non-empty string")
    where = f"{where} ({sample_id})"
    body = item.get("conversation")
    if not isinstance(body, Mapping):
        raise LocomoFormatError(f"{where}: 'conversation' must be an object")
    sessions = _sessions(body, where)
    turn_ids = {turn.dia_id for session in sessions for turn in session.turns}
    qa = item.get("qa")
    if not isinstance(qa, list):
        raise LocomoFormatError(f"{where}: 'qa' must be a list")
    questions: list[Question] = []
    skipped: list[SkippedQuestion] = []
    for index, entry in enumerate(qa):
        question = _question(entry, index, turn_ids, f"{where}: qa[{index}]")
        if isinstance(question, SkippedQuestion):
            skipped.append(question)
        else:
            questions.append(question)
    return Conversation(sample_id, sessions, tuple(questions), tuple(skipped))


def _sessions(body: Mapping[str, Any], where: str) -> tuple[Session, ...]:
    numbered: list[tuple[int, str]] = []
    for key in body:
        match = _SESSION_KEY.match(key)
        if match:
            numbered.append((int(match.group(1)), key))
    sessions: list[Session] = []
    seen_ids: set[str] = set()
    for number, key in sorted(numbered):
        turns_raw = body[key]
        if not isinstance(turns_raw, list):
            raise LocomoFormatError(f"{where}: {key!r} must be a list of turns, got {type(turns_raw).__name__}")
        date_key = f"{key}_date_time"
        date_raw = body.get(date_key)
        if not isinstance(date_raw, str):
            raise LocomoFormatError(f"{where}: {date_key!r} is missing or not a string")
        try:
            started_at = parse_session_date(date_raw)
        except ValueError as exc:
            raise LocomoFormatError(f"{where}: {date_key!r}: {exc}") from None
        turns = tuple(_turn(t, number, f"{where}: {key}[{i}]") for i, t in enumerate(turns_raw))
        for turn in turns:
            if turn.dia_id in seen_ids:
                raise LocomoFormatError(f"{where}: {key}: dia_id {turn.dia_id!r} appears twice in the conversation")
            seen_ids.add(turn.dia_id)
        if turns:
            sessions.append(Session(number, started_at, turns))
    if not sessions:
        raise LocomoFormatError(f"{where}: no 'session_<n>' list with turns")
    return tuple(sessions)


def _turn(raw: Any, session: int, where: str) -> Turn:
    if not isinstance(raw, Mapping):
        raise LocomoFormatError(f"{where}: a turn must be an object, got {type(raw).__name__}")
    for key in ("speaker", "dia_id", "text"):
        if not isinstance(raw.get(key), str):
            raise LocomoFormatError(f"{where}: {key!r} is missing or not a string")
    if not raw["speaker"].strip() or not raw["dia_id"].strip():
        raise LocomoFormatError(f"{where}: 'speaker' and 'dia_id' must not be empty")
    caption = raw.get("blip_caption")
    if caption is not None and not isinstance(caption, str):
        raise LocomoFormatError(f"{where}: 'blip_caption' must be a string, got {type(caption).__name__}")
    shared = caption.strip() if caption else ""
    return Turn(raw["dia_id"], session, raw["speaker"], raw["text"], shared or None)


def _question(raw: Any, index: int, turn_ids: Collection[str], where: str) -> Question | SkippedQuestion:
    if not isinstance(raw, Mapping):
        raise LocomoFormatError(f"{where}: must be an object, got {type(raw).__name__}")
    text = raw.get("question")
    if not isinstance(text, str) or not text.strip():
        raise LocomoFormatError(f"{where}: 'question' is missing or not a non-empty string")
    category = raw.get("category")
    if isinstance(category, bool) or not isinstance(category, int):
        raise LocomoFormatError(f"{where}: 'category' must be an integer, got {type(category).__name__}")
    evidence = raw.get("evidence")
    if not isinstance(evidence, list):
        raise LocomoFormatError(f"{where}: 'evidence' must be a list, got {type(evidence).__name__}")
    valid, unresolved = normalise_evidence(evidence, turn_ids)
    if not valid:
        return SkippedQuestion(index, category, unresolved)
    return Question(index, text, category, valid, unresolved)
