"""One SQL statement for both backends: written with SQLite's `?` placeholders, given to psycopg with
`%s`. Only statements that differ in nothing else are shared this way; a statement holding a `%` or a
`?` of its own (a LIKE pattern, a jsonb operator) is refused when the module defining it loads, so the
swap can never change what a statement means."""

from __future__ import annotations

from dataclasses import dataclass, field


def postgres_sql(sql: str) -> str:
    """`sql` with psycopg's `%s` in place of each `?`."""
    if "%" in sql:
        raise ValueError("a shared statement must hold no '%': write it for each backend")
    return sql.replace("?", "%s")


@dataclass(frozen=True)
class Dialect:
    """A backend's placeholder: a shared statement is written with `?` and given to the backend by `sql`
    (cached: the same statements come back on every call)."""

    mark: str
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, statement: str) -> str:
        found = self._cache.get(statement)
        if found is None:
            found = statement if self.mark == "?" else postgres_sql(statement)
            self._cache[statement] = found
        return found


SQLITE = Dialect("?")
POSTGRES = Dialect("%s")
