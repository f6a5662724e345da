"""Where a search looks, as SQL for either backend: a chat, and optionally one segment and a time range
(`since` inclusive, `until` exclusive), on the columns of whichever table is searched (`messages`, a
vector table). The rule is written once; the backends differ only in the placeholder."""

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
) -> tuple[str, list[Any]]:
    """The scope's condition and its parameters (the chat's key first), `mark` being the placeholder."""
    clauses = [f"{columns.chat} = {mark}"]
    params: list[Any] = [chat_key]
    if segment_id is not None:
        clauses.append(f"{columns.segment} = {mark}")
        params.append(segment_id)
    if since is not None:
        clauses.append(f"{columns.time} >= {mark}")
        params.append(to_millis(since))
    if until is not None:
        clauses.append(f"{columns.time} < {mark}")
        params.append(to_millis(until))
    return " AND ".join(clauses), params
