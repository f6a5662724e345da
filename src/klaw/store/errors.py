"""The store's errors, and the one rule they word for two embedders' vectors.

Apart from `protocol.py` (which re-exports them) so that the protocol stays the repositories' shapes;
everything that raises or catches these imports them from either.
"""

from __future__ import annotations

from klaw.errors import KlawError


class StorageError(KlawError, RuntimeError):
    """The store cannot do what was asked; the message says why and what to do."""


class IndexMismatchError(StorageError):
    """Vectors of another embedder (model or dimension) are already stored in a vector table."""


def embedder_mismatch(
    table: str, stored: int, bound: tuple[str, int] | None, configured: tuple[str, int]
) -> IndexMismatchError | None:
    """The refusal to mix two embedders' vectors, or None: `table` holds `stored` vectors of the `bound`
    (embedder id, dim) and the configured one differs. The one wording of the rule, raised by each
    backend's `bind_embedder` at the engine's start and said by `klaw config check` before it."""
    if bound is None or stored == 0 or tuple(bound) == tuple(configured):
        return None
    return IndexMismatchError(
        f"{table} holds {stored} vectors from embedder {bound[0]!r} (dim {bound[1]}), but the configured"
        f" embedder is {configured[0]!r} (dim {configured[1]}). Vectors of different models cannot be mixed:"
        " run 'klaw reindex' to re-embed with the configured embedder, or set the embedder back"
        " in engine.yaml."
    )


def engine_embedder_conflict(holder: str, running: tuple[str, int], configured: tuple[str, int]) -> IndexMismatchError:
    """The refusal to start beside a live engine (`holder`) embedding with another embedder on a shared
    database (decision 532): the tables' binding would change under the engine still running, empty or not."""
    return IndexMismatchError(
        f"another engine ({holder}) is running on this database with embedder {running[0]!r} (dim {running[1]}),"
        f" but this engine's configured embedder is {configured[0]!r} (dim {configured[1]}). Engines sharing a"
        " database must embed with the same model: set this engine's embedder to the running one's in"
        " engine.yaml, or stop the other engine first and then, with this engine alone, run 'klaw reindex'"
        " to re-embed with the configured embedder."
    )


def engine_displaced(what: str, theirs: tuple[str, int], own: tuple[str, int]) -> IndexMismatchError:
    """What an engine back from a stall past its lease says when another embedder took the shared database
    meanwhile (decision 541): `what` happened (another engine started; an engine re-bound the vector tables)."""
    return IndexMismatchError(
        f"this engine stalled past its lease (database.leaseSeconds) and {what}: embedder"
        f" {theirs[0]!r} (dim {theirs[1]}), where this engine embeds with {own[0]!r} (dim {own[1]}): it stores no"
        " more vectors. Stop this engine; set its embedder to the other's in engine.yaml, or stop the other"
        " engine and, with this one alone, run 'klaw reindex'."
    )


def home_copy_running(place: str, holder: str) -> StorageError:
    """The refusal to start a copy of a home (the same `home-id`: restored from its backup, or copied) while an
    engine of it runs from another place on the same PostgreSQL database (decision 539)."""
    return StorageError(
        f"an engine of this same home is running on this database from another place, {place} ({holder}):"
        " this home is a copy of that one (restored from its backup, or copied). Two copies of one home would"
        " answer its chats from one memory and run its scheduled tasks twice. Give this home its own database"
        " (restore the pg_dump into a new one and name it in database.urlEnv: docs/postgres.md, 'Restoring a"
        " backup'), or stop the engine at that place if this home replaces it"
    )


def home_moved(place: str, when: str) -> str:
    """The warning of an engine starting a home from another place than its last start (decision 539)."""
    return (
        f"this home last ran on this PostgreSQL database from another place, {place} (started {when}): if that"
        " folder is a copy of this home that may start again (this one restored from its backup, say), give one"
        " of them its own database (docs/postgres.md, 'Restoring a backup'), or the two would answer its chats"
        " from one memory and each run its scheduled tasks; if the home moved here, nothing to do"
    )


class StoreNotSetUp(StorageError):
    """No klaw database where the configured one should be (no klaw.db yet; no klaw tables in the PostgreSQL
    database): an open not asked to create one (`backend.open_storage`) left it as it is. Each command says
    what that means for it (`klaw db info`: nothing stored yet; `klaw memory list`: exit 1; decision 467)."""


class StorageUnavailable(StorageError):
    """The database server cannot be reached now (down, restarting, the network away): the same call may
    well succeed later, so a message refused for it is worth sending again."""


class ServerUnreachable(StorageUnavailable):
    """No PostgreSQL server answered at all (connection refused, timed out, no socket, a name not resolved
    yet) or it answered that it is starting or stopping: at an engine's start a passing fault, retried by
    the service (exit 75), unlike a server that answered no (a password, a database missing; decision 475)."""
