"""What klaw.db holds, counted (`Storage.counts`): `klaw db info` and the reindex report."""

from __future__ import annotations

import apsw

from klaw.store.protocol import StoreCounts
from klaw.store.shared.record_kinds import control_sql, not_control_sql
from klaw.store.sqlite.query import fetch_all, fetch_value
from klaw.store.sqlite.vectors import MESSAGE_VECTORS, vector_table_exists


def store_counts(connection: apsw.Connection) -> StoreCounts:
    def count(sql: str) -> int:
        return int(fetch_value(connection, sql) or 0)

    errors = fetch_all(
        connection,
        "SELECT last_error, count(*) AS jobs FROM embedding_jobs WHERE last_error IS NOT NULL"
        " GROUP BY last_error ORDER BY jobs DESC, last_error",
    )
    has_vectors = vector_table_exists(connection, MESSAGE_VECTORS)
    return StoreCounts(
        messages=count(f"SELECT count(*) FROM messages m WHERE {not_control_sql()}"),
        control_records=count(f"SELECT count(*) FROM messages m WHERE {control_sql()}"),
        chats=count("SELECT count(*) FROM chats"),
        segments=count("SELECT count(*) FROM segments"),
        sessions=count("SELECT count(*) FROM sessions"),
        exchanges=count("SELECT count(*) FROM exchanges"),
        vectors=count(f"SELECT count(*) FROM {MESSAGE_VECTORS}") if has_vectors else 0,
        embedding_pending=count("SELECT count(*) FROM embedding_jobs WHERE status = 'pending'"),
        embedding_failed=count("SELECT count(*) FROM embedding_jobs WHERE status = 'failed'"),
        embedding_errors=tuple((str(row[0]), int(row[1])) for row in errors),
        message_jobs=(
            count("SELECT count(*) FROM embedding_jobs WHERE status = 'pending' AND target = 'message'"),
            count("SELECT count(*) FROM embedding_jobs WHERE status = 'failed' AND target = 'message'"),
        ),
    )
