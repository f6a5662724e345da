"""FTS5's own statements stay prepared from one searched word to the next (decision 439).

FTS5 finds each word of a MATCH in each segment of its index with a statement of its own (`SELECT pgno
FROM '<table>_idx' WHERE segid=? AND term<=? ...`). SQLite, built with STAT4, planned it from the bound
term and prepared it again whenever the term changed: about one run in three at 100k messages, a tenth
of a full-text search's CPU. klaw.db's connections plan without bound values (QPSG), so none is prepared
again. Here a store is filled in several appends (several segments), and full-text searches for varied
words run through the store's API on its read connections: FTS5's term lookups are never prepared
again. On the old code they were (statements prepared before the migrations' schema changes are, once:
not asserted).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = ["garden", "bakery", "lisbon", "violin", "harbour", "pottery", "marathon", "orchard", "lantern", "glacier"]


async def test_searched_words_do_not_prepare_ftss_statements_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reprepared: dict[str, int] = {}

    def profile(event: dict[str, object]) -> None:
        status = event.get("stmt_status")
        count = status.get("SQLITE_STMTSTATUS_REPREPARE", 0) if isinstance(status, dict) else 0
        sql = str(event["sql"])
        reprepared[sql] = max(reprepared.get(sql, 0), int(count))

    monkeypatch.setattr(
        apsw, "connection_hooks", [lambda connection: connection.trace_v2(apsw.SQLITE_TRACE_PROFILE, profile)]
    )
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        for batch in range(4):  # each append its own transaction: a segment of the index each
            await store.messages.append_many(
                [
                    MessageRecord(
                        CHAT,
                        Role.USER,
                        f"note {batch} {i}: {WORDS[i % len(WORDS)]} and {WORDS[(i + batch) % len(WORDS)]}",
                        created_at=T0 + timedelta(seconds=100 * batch + i),
                    )
                    for i in range(50)
                ]
            )
        for round_ in range(3):
            for i, word in enumerate(WORDS):
                hits = await store.search.full_text(CHAT, f"{word} {WORDS[(i + round_ + 1) % len(WORDS)]}", limit=5)
                assert hits, word
    finally:
        await store.aclose()
    lookups = [sql for sql in reprepared if "_idx' WHERE segid=? AND term<=?" in sql]
    assert lookups  # FTS5's term lookups were seen
    assert {sql: reprepared[sql] for sql in lookups if reprepared[sql]} == {}
