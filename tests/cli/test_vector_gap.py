"""`klaw db migrate`'s words when PostgreSQL holds more message vectors than klaw.db: newcomer19 saw "vectors
6 | 8" and "(not all embedded)" and could not tell whether something was wrong. klaw.db's two were waiting in
its queue (a piped `klaw chat` ends before its background embedding): now said, with "nothing is missing"
(decision 476). The counts are a `StoreCounts` as both stores give it; the move's own run is
tests/cli/test_db_migrate.py."""

from __future__ import annotations

from klaw.cli.vector_gap import vector_gap
from klaw.store.protocol import StoreCounts


def _counts(vectors: int, pending: int = 0, failed: int = 0, summaries: int = 0) -> StoreCounts:
    return StoreCounts(
        chats=1,
        segments=1,
        messages=14,
        control_records=18,
        sessions=1,
        exchanges=6,
        embedding_pending=pending + summaries,
        message_jobs=(pending, failed),
        embedding_failed=failed,
        vectors=vectors,
        embedding_errors=(),
    )


def test_vectors_waiting_in_klaw_db_are_said_to_be_no_loss() -> None:
    said = vector_gap(_counts(6, pending=2), _counts(8))
    assert (
        "klaw.db holds 6, with 2 message(s) waiting to be embedded" in said
        and "PostgreSQL holds 8: nothing is missing" in said
    )


def test_vectors_klaw_db_never_queued_are_explained_and_fewer_in_postgres_is_a_warning() -> None:
    said = vector_gap(_counts(6), _counts(8))
    assert "klaw.db's engine skipped some when they were stored" in said and "nothing is missing" in said
    assert vector_gap(_counts(8), _counts(6)).startswith("warning: message vectors: PostgreSQL holds 6, fewer")
    assert vector_gap(_counts(8), _counts(8)) == ""


def test_a_summarys_waiting_job_is_not_counted_as_a_message_vector() -> None:
    """adversary28: "klaw.db holds 76 (and 2 waiting…), PostgreSQL 77 … klaw.db's engine skipped some": one of
    the two waiting jobs was a summary's, which fills no message vector; the gap was the other, waiting."""
    said = vector_gap(_counts(76, pending=1, summaries=1), _counts(77))
    assert "klaw.db holds 76, with 1 message(s) waiting to be embedded" in said and "nothing is missing" in said
    assert "skipped" not in said
