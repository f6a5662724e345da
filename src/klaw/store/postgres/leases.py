"""Chat leases in PostgreSQL (`chat_leases`): which engine serves a chat's turns, until when.

Several engines share one database (docs/decisions/170-chat-leases.md): a chat's turn runs only in the
engine holding its lease, so a chat's turns never overlap. A lease is a row with an expiry on the
server's clock (engines on machines whose clocks differ still agree), taken when free, expired or
already ours, renewed while the engine lives, released when the chat is idle. An engine that dies
stops renewing: after the expiry another engine takes the chat over.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from klaw.store.errors import engine_displaced, engine_embedder_conflict, home_copy_running, home_moved
from klaw.store.lease_fence import LeaseFence
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, PostgresDatabase, execute, fetch_all, fetch_one
from klaw.store.postgres.vectors import MEMORY_VECTORS, MESSAGE_VECTORS
from klaw.store.records import ChatRef, MessageType, to_millis
from klaw.store.shared.record_kinds import user_message_sql

# Held while an engine checks and records its embedder (`join`): two engines starting at once see each other.
ENGINE_LEASES_LOCK = 0x6B6C6165  # "klae"


class PostgresLeases:
    def __init__(self, db: PostgresDatabase, chats: ChatKeys) -> None:
        self._db = db
        self._chats = chats
        self._embedders: dict[str, tuple[str, int]] = {}  # each holder's embedder, as it joined: `keep` restores it
        self._homes: dict[str, tuple[str, str]] = {}  # each holder's home (id, place), as it joined (decision 539)

    async def join(
        self, holder: str, embedder: tuple[str, int], seconds: float, home: tuple[str, str] | None = None
    ) -> str:
        """Record this engine and its embedder for `seconds` (renewed by `keep`); refused with
        `IndexMismatchError` while another engine's live record names another embedder (decision 532).
        `home` (its id and place, `home_identity`): refused with `StorageError` while a live engine of the same
        home runs from another place (a restored copy beside its original); a warning returned when the home
        last started from another place, which this start becomes (decision 539); "" otherwise."""
        async with self._db.transaction() as connection:
            said = await self._enter(connection, holder, embedder, seconds, coming_back=False, home=home)
        self._embedders[holder] = embedder
        if home is not None:
            self._homes[holder] = home
        return said

    async def keep(self, holder: str, seconds: float) -> bool:
        """Renew `holder`'s record for `seconds`; True when it was gone and is restored: the engine stalled past
        its lease and a starting engine dropped its row (decision 541). Restored only as `join` would let it
        start now; `IndexMismatchError` (`engine_displaced`) when another embedder took the database meanwhile."""
        async with self._db.transaction() as connection:
            rows = await fetch_all(
                connection,
                "UPDATE engine_leases SET expires_at = clock_timestamp() + make_interval(secs => %s)"
                " WHERE holder = %s RETURNING holder",
                (seconds, holder),
            )
            if rows or holder not in self._embedders:
                return False
            home = self._homes.get(holder)
            await self._enter(connection, holder, self._embedders[holder], seconds, coming_back=True, home=home)
        return True

    async def _enter(
        self,
        connection: Connection,
        holder: str,
        embedder: tuple[str, int],
        seconds: float,
        *,
        coming_back: bool,
        home: tuple[str, str] | None = None,
    ) -> str:
        """`holder`'s row written under the advisory lock once no live engine embeds otherwise; `coming_back`
        (its row was dropped while it stalled): nor may the vector tables be bound to another embedder now."""
        await execute(connection, "SELECT pg_advisory_xact_lock(%s)", (ENGINE_LEASES_LOCK,))
        await execute(connection, "DELETE FROM engine_leases WHERE expires_at <= clock_timestamp()")
        other = await fetch_one(
            connection,
            "SELECT holder, embedder_id, dim FROM engine_leases"
            " WHERE holder <> %s AND (embedder_id <> %s OR dim <> %s) ORDER BY expires_at DESC LIMIT 1",
            (holder, embedder[0], embedder[1]),
        )
        if other is not None:
            running = (str(other[1]), int(other[2]))
            if coming_back:
                raise engine_displaced(f"another engine ({other[0]}) started meanwhile", running, embedder)
            raise engine_embedder_conflict(str(other[0]), running, embedder)
        if coming_back:
            bound = await fetch_one(
                connection,
                "SELECT embedder_id, dim FROM index_meta"
                " WHERE table_name = ANY(%s) AND (embedder_id <> %s OR dim <> %s) LIMIT 1",
                ([MESSAGE_VECTORS, MEMORY_VECTORS], embedder[0], embedder[1]),
            )
            if bound is not None:
                raise engine_displaced(
                    "an engine re-bound the vector tables meanwhile", (str(bound[0]), int(bound[1])), embedder
                )
        # a copy of this home running elsewhere, or its last place (decision 539); not rechecked coming back
        said = "" if home is None or coming_back else await _home_place(connection, holder, home)
        await execute(
            connection,
            "INSERT INTO engine_leases (holder, embedder_id, dim, expires_at, home_id, place)"
            " VALUES (%s, %s, %s, clock_timestamp() + make_interval(secs => %s), %s, %s)"
            " ON CONFLICT (holder) DO UPDATE SET embedder_id = excluded.embedder_id, dim = excluded.dim,"
            " expires_at = excluded.expires_at, home_id = excluded.home_id, place = excluded.place",
            (holder, embedder[0], embedder[1], seconds, *(home or (None, None))),
        )
        return said

    async def acquire(self, chat: ChatRef, holder: str, seconds: float) -> int | None:
        """Take (or extend) the chat's lease for `seconds` unless another holder's is still valid; the
        lease's new generation (every take raises it: the fence of the turn that took it)."""
        async with self._db.transaction() as connection:
            chat_key = await self._chats.ensure(connection, chat)
            row = await fetch_one(
                connection,
                "INSERT INTO chat_leases (chat, holder, expires_at)"
                " VALUES (%s, %s, clock_timestamp() + make_interval(secs => %s))"
                " ON CONFLICT (chat) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,"
                " generation = excluded.generation"
                " WHERE chat_leases.holder = excluded.holder OR chat_leases.expires_at <= clock_timestamp()"
                " RETURNING generation",
                (chat_key, holder, seconds),
            )
        return None if row is None else int(row[0])

    async def renew(self, chats: Sequence[ChatRef], holder: str, seconds: float) -> set[ChatRef]:
        """Extend the leases `holder` still holds among `chats`; returns those it no longer holds
        (expired and taken by another engine meanwhile). The engine's own record is `keep`'s."""
        if not chats:
            return set()
        async with self._db.transaction() as connection:
            keys = {await self._chats.ensure(connection, chat): chat for chat in chats}
            rows = await fetch_all(
                connection,
                "UPDATE chat_leases SET expires_at = clock_timestamp() + make_interval(secs => %s)"
                " WHERE chat = ANY(%s) AND holder = %s RETURNING chat",
                (seconds, list(keys), holder),
            )
        kept = {int(row[0]) for row in rows}
        return {chat for key, chat in keys.items() if key not in kept}

    async def release(self, chat: ChatRef, holder: str) -> None:
        async with self._db.transaction() as connection:
            chat_key = await self._chats.find(connection, chat)
            if chat_key is not None:
                await execute(connection, "DELETE FROM chat_leases WHERE chat = %s AND holder = %s", (chat_key, holder))

    async def release_all(self, holder: str) -> None:
        async with self._db.transaction() as connection:
            await execute(connection, "DELETE FROM chat_leases WHERE holder = %s", (holder,))
            await execute(connection, "DELETE FROM engine_leases WHERE holder = %s", (holder,))

    async def forgotten_after(self, chat: ChatRef, rowid: int) -> bool:
        """Whether a forget was stored in the chat after the message `rowid` (its tombstone's row is later):
        one index probe (`messages_by_chat_type`), made before each of a turn's model calls (decision 286).
        The type is written in the statement, not bound: the plan a prepared statement comes to reuse then
        knows how rare a forget is; with it bound, that plan scanned every message of the table for none
        (at 100,000 messages, 35-70 ms a probe, several a turn: decision 424)."""
        found = await self._chats.value(
            self._db,
            chat,
            f"SELECT EXISTS (SELECT 1 FROM messages WHERE chat = %s AND type = '{MessageType.FORGET.value}'"
            " AND rowid > %s)",
            lambda key: (key, rowid),
        )
        return bool(found)

    async def unserved(self, since: datetime, until: datetime, holder: str) -> list[ChatRef]:
        """Chats with a person's message created between `since` and `until` that no exchange answered
        yet, whose lease no other engine holds: what an engine that died (or released the chat with a
        message arriving at another engine meanwhile) left to answer."""
        async with self._db.connection() as connection:
            rows = await fetch_all(
                connection,
                "SELECT c.channel, c.chat_id FROM chats c WHERE c.id IN ("
                f" SELECT DISTINCT m.chat FROM messages m WHERE m.created_at BETWEEN %s AND %s AND {user_message_sql()}"
                "  AND m.segment_id = (SELECT max(s.id) FROM segments s WHERE s.chat = m.chat)"
                "  AND m.rowid > COALESCE((SELECT max(e.user_message_rowid) FROM exchanges e"
                "   WHERE e.segment_id = m.segment_id AND e.status NOT IN ('open', 'interrupted')), 0))"
                " AND NOT EXISTS (SELECT 1 FROM chat_leases l WHERE l.chat = c.id AND l.holder <> %s"
                "  AND l.expires_at > clock_timestamp())"
                " ORDER BY c.id",
                (to_millis(since), to_millis(until), holder),
            )
        return [ChatRef(str(channel), str(chat_id)) for channel, chat_id in rows]


# The fence check an append makes (decision 200), as a column of the read it makes anyway after the
# chat's lock (messages.py): the fenced lease is still this holder's, of the same generation. Its row is
# locked FOR SHARE until the append commits, so a takeover's `acquire` (an UPDATE of the row) waits for
# it and then finds the append stored. An expired lease no other engine took still counts: nobody else
# answers the chat, and whoever takes it next reads this append's result.
FENCE_HELD = "EXISTS (SELECT 1 FROM chat_leases WHERE chat = %s AND holder = %s AND generation = %s FOR SHARE)"


def fence_params(chat_key: int, fence: LeaseFence) -> tuple[int, str, int]:
    """`FENCE_HELD`'s parameters."""
    return (chat_key, fence.holder, fence.generation)


async def _home_place(connection: Connection, holder: str, home: tuple[str, str]) -> str:
    """`join`'s check of the home (decision 539), under its lock: a live engine of this home elsewhere refuses
    the start; another last place is returned as a warning and replaced by this one."""
    home_id, place = home
    twin = await fetch_one(
        connection,
        "SELECT holder, place FROM engine_leases WHERE holder <> %s AND home_id = %s AND place <> %s LIMIT 1",
        (holder, home_id, place),
    )
    if twin is not None:
        raise home_copy_running(str(twin[1]), str(twin[0]))
    last = await fetch_one(
        connection,
        "SELECT place, to_char(started_at, 'YYYY-MM-DD HH24:MI TZ') FROM home_places WHERE home_id = %s",
        (home_id,),
    )
    await execute(
        connection,
        "INSERT INTO home_places (home_id, place, started_at) VALUES (%s, %s, clock_timestamp())"
        " ON CONFLICT (home_id) DO UPDATE SET place = excluded.place, started_at = excluded.started_at",
        (home_id, place),
    )
    return home_moved(str(last[0]), str(last[1])) if last is not None and last[0] != place else ""
