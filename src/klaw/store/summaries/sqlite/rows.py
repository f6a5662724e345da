"""Loading summaries (mapped by `summaries/rows.py`), and queueing a summary's embedding inside the
caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from klaw.store.records import EmbeddingJobStatus
from klaw.store.shared.statements import REQUEUE_JOB
from klaw.store.sqlite.query import fetch_all
from klaw.store.summaries.records import SUMMARY_TARGET, Summary, SummaryKind
from klaw.store.summaries.rows import SUMMARY_COLUMNS, SUMMARY_FROM, summary_from_row

# The condition a summary needs to get a vector (see `Summary.embeddable`), on alias `s`.
EMBEDDABLE = f"(s.kind = '{SummaryKind.EXCHANGE.value}' OR s.final = 1)"


def load_summaries(connection: apsw.Connection, where: str, params: Sequence[object] = ()) -> list[Summary]:
    rows = fetch_all(connection, f"SELECT {SUMMARY_COLUMNS} FROM {SUMMARY_FROM} WHERE {where}", params)
    return [summary_from_row(row) for row in rows]


def load_summary(connection: apsw.Connection, summary_id: int) -> Summary | None:
    found = load_summaries(connection, "s.id = ?", (summary_id,))
    return found[0] if found else None


def queue_summary_job(connection: apsw.Connection, summary_id: int, now_millis: int) -> None:
    """Queue (or queue again, due now) the summary's embedding; call inside the write's transaction."""
    connection.execute(
        REQUEUE_JOB,
        (SUMMARY_TARGET, summary_id, EmbeddingJobStatus.PENDING.value, now_millis, now_millis),
    )
