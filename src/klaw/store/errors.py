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
