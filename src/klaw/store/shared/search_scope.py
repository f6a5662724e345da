"""Where a search looks, as SQL for either backend: a chat, and optionally one segment, the segments
before one (`before_segment_id`: the chat's past conversations) and a time range (`since` inclusive,
`until` exclusive), on the columns of whichever table is searched (`messages`, a vector table). The
rule is written once; the backends differ only in the placeholder.

Segment ids grow with time across the whole database (a chat's next segment is opened by the record
that closes the one before), so a chat's segments before segment S are those of its segments with a
smaller id, and their messages all have smaller rowids than any message of S: the message that
ended them was appended before S existed (decision 187)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from klaw.store.records import to_millis


@dataclass(frozen=True, slots=True)
class ScopeColumns:
    """The columns holding a row's chat key, segment and creation time."""

    chat: str
    segment: str
    time: str


MESSAGE_SCOPE = ScopeColumns("m.chat", "m.segment_id", "m.created_at")


def scope_sql(
    columns: ScopeColumns,
    chat_key: int,
    segment_id: int | None,
    since: datetime | None,
    until: datetime | None,
    mark: str = "?",
    *,
    before_segment_id: int | None = None,
) -> tuple[str, list[Any]]:
    """The scope's condition and its parameters (the chat's key first), `mark` being the placeholder."""
    clauses = [f"{columns.chat} = {mark}"]
    params: list[Any] = [chat_key]
    if segment_id is not None:
        clauses.append(f"{columns.segment} = {mark}")
        params.append(segment_id)
    if before_segment_id is not None:
        clauses.append(f"{columns.segment} < {mark}")
        params.append(before_segment_id)
    if since is not None:
        clauses.append(f"{columns.time} >= {mark}")
        params.append(to_millis(since))
    if until is not None:
        clauses.append(f"{columns.time} < {mark}")
        params.append(to_millis(until))
    return " AND ".join(clauses), params


def segments_compared(segment_id: int | None, before_segment_id: int | None, mark: str = "?") -> tuple[str, int] | None:
    """The segments a scope names as a comparison of a segment id and its value (`"= ?", 12`): one
    segment, or the chat's before one; None for the whole chat. A word count's scope size is then the
    sum of those segments' kept counts instead of a count of rows."""
    if segment_id is not None:
        return f"= {mark}", segment_id
    if before_segment_id is not None:
        return f"< {mark}", before_segment_id
    return None
