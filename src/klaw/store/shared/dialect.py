"""One SQL statement for both backends: written with SQLite's `?` placeholders, given to psycopg with
`%s`. Only statements that differ in nothing else are shared this way; a statement holding a `%` or a
`?` of its own (a LIKE pattern, a jsonb operator) is refused when the module defining it loads, so the
swap can never change what a statement means."""

from __future__ import annotations


def postgres_sql(sql: str) -> str:
    """`sql` with psycopg's `%s` in place of each `?`."""
    if "%" in sql:
        raise ValueError("a shared statement must hold no '%': write it for each backend")
    return sql.replace("?", "%s")
