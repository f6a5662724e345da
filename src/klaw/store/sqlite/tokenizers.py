"""Binding klaw.db's full-text indexes to one tokenizer (`database.tokenizer`), as `index_meta` binds vectors.

A full-text index is only as good as the agreement between how its rows were cut into words and how a
query is: an index built by the English stemmer and searched as Chinese trigrams finds nothing, silently.
So the tokenizer is fixed when the database is made, recorded where SQLite itself keeps it (the
`tokenize` option in the FTS5 tables' definitions in `sqlite_master`: nothing to keep in step), and
checked at every open:

- the same as configured: nothing to do;
- another, on a database holding no message yet (a new home, or `klaw reindex`'s fresh build): the
  FTS5 tables are made again with the configured one (nothing indexed is lost);
- another, with messages stored: refused with `IndexMismatchError` naming both and the two ways out
  (`klaw reindex` rebuilds the index with the configured tokenizer; or set the recorded one back).

Migrations create the tables with `porter` (their SQL is fixed); `bind_tokenizer` runs after them.
(docs/decisions/160-full-text-tokenizer-per-home.md)
"""

from __future__ import annotations

import re

import apsw

from klaw.config import FullTextTokenizer
from klaw.store.protocol import IndexMismatchError
from klaw.store.sqlite.query import fetch_one, fetch_value

# The FTS5 `tokenize` option for each setting. `remove_diacritics 2` folds accents ("café" = "cafe");
# the trigram tokenizer's own option (SQLite 3.45+) does the same with 1.
TOKENIZE_OPTIONS: dict[FullTextTokenizer, str] = {
    "porter": "porter unicode61 remove_diacritics 2",
    "unicode61": "unicode61 remove_diacritics 2",
    "trigram": "trigram remove_diacritics 1",
}
FTS_TABLES = ("messages_fts", "messages_fts_last", "memory_chunks_fts")
_TOKENIZE = re.compile(r"tokenize\s*=\s*'([^']*)'", re.IGNORECASE)


def indexed_tokenizer(connection: apsw.Connection, table: str = "messages_fts") -> str:
    """The `tokenize` option `table` was created with: a name of `TOKENIZE_OPTIONS` when it is one of
    them, else the option itself."""
    option = _option(connection, table)
    return next((name for name, known in TOKENIZE_OPTIONS.items() if known == option), option)


def bind_tokenizer(connection: apsw.Connection, wanted: FullTextTokenizer) -> None:
    """Make the full-text indexes use `wanted`, or refuse when messages are indexed with another."""
    _same_as_messages(connection)
    current = {table: indexed_tokenizer(connection, table) for table in FTS_TABLES}
    if all(name == wanted for name in current.values()):
        return
    with connection:
        if fetch_one(connection, "SELECT 1 FROM messages LIMIT 1") is not None:
            raise IndexMismatchError(
                f"klaw.db's full-text index uses the {current['messages_fts']} tokenizer, but engine.yaml sets"
                f" database.tokenizer: {wanted}. The words already indexed cannot be searched the other way:"
                f" run 'klaw reindex' to rebuild the index with {wanted} (from the log; stop the engine first),"
                f" or set database.tokenizer back to {current['messages_fts']}."
            )
        for table in FTS_TABLES:
            _recreate(connection, table, TOKENIZE_OPTIONS[wanted])


def _recreate(connection: apsw.Connection, table: str, option: str) -> None:
    """`table` dropped and created again with the `tokenize` option `option`, secure-delete on (but
    for `messages_fts_last`), and
    filled from its content (empty here). The triggers that feed it live on the content tables and
    name it only in their bodies, so they keep working."""
    sql = str(fetch_value(connection, "SELECT sql FROM sqlite_master WHERE name = ?", (table,)))
    connection.execute(f"DROP TABLE {table}")
    connection.execute(_TOKENIZE.sub(lambda _: f"tokenize = '{option}'", sql, count=1))
    if table != "messages_fts_last":  # rebuilt on forget instead: migration 0013
        connection.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('secure-delete', 1)")
    connection.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")


def _same_as_messages(connection: apsw.Connection) -> None:
    """`messages_fts_last` cut into words as `messages_fts` is. Migration 0013 creates it with `porter`
    (its SQL is fixed) on a database whose messages may be indexed with another tokenizer; it holds
    the open segments' last messages only (a few rows), so it is made again from them."""
    option = _option(connection, "messages_fts")
    if _option(connection, "messages_fts_last") != option:
        with connection:
            _recreate(connection, "messages_fts_last", option)


def _option(connection: apsw.Connection, table: str) -> str:
    sql = str(fetch_value(connection, "SELECT sql FROM sqlite_master WHERE name = ?", (table,)) or "")
    found = _TOKENIZE.search(sql)
    return " ".join(found.group(1).split()) if found else "unicode61"  # FTS5's default
