"""Why `klaw db migrate`'s PostgreSQL holds another number of message vectors than klaw.db, in words that
tell a person whether anything is wrong (newcomer19, decision 476).

The move embeds every message from the log at once; klaw.db's engine embeds in the background, so a
`klaw chat` that ended right after its reply leaves its messages waiting in klaw.db's queue (`klaw db
info`'s "pending embeddings") until its next start. Those, and the failed ones, account for a gap
that is not a loss. Any other gap comes from how klaw.db's messages were embedded when they were stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store's protocol is not for `klaw --help` (db_cmd imports this module at its top)
    from klaw.store.protocol import StoreCounts


def vector_gap(sqlite: StoreCounts, postgres: StoreCounts) -> str:
    """One paragraph on the message vectors of klaw.db beside PostgreSQL's; empty when they are equal."""
    old, new = sqlite.vectors, postgres.vectors
    if old == new:
        return ""
    waiting, failed = sqlite.message_jobs  # a summary's job fills no message vector (adversary28)
    queued = f"{waiting} message(s) waiting to be embedded" + (f" and {failed} failed" if failed else "")
    if new > old and old + waiting + failed == new:
        return (
            f"message vectors: klaw.db holds {old}, with {queued} (its engine embeds in the background; a `klaw"
            f" chat` that ended right after its reply leaves them for its next start). The move embedded every"
            f" message at once, so PostgreSQL holds {new}: nothing is missing."
        )
    if new > old:
        return (
            f"message vectors: klaw.db holds {old} (and {queued}), PostgreSQL {new}: the move embedded every message"
            " autoRag.minMessageTokens lets through; klaw.db's engine skipped some when they were stored (with"
            " embeddings off, /embeddings off, or another minMessageTokens). PostgreSQL's are the full set: nothing"
            " is missing there."
        )
    return (
        f"warning: message vectors: PostgreSQL holds {new}, fewer than klaw.db's {old}: some messages were not"
        " embedded by the move. `klaw db info` on the PostgreSQL home shows them as pending or failed; its engine"
        " embeds the pending ones when it runs."
    )
