"""psycopg's own error text with the connection string masked, but for the server's host and port.

psycopg and the server repeat what they were given: a malformed DSN whole ('missing "=" after
"postgresql//klaw:hunter2@db…"'), an `options=` value ('invalid command-line argument for server process:
hunter2'), the user, host and port. klaw's messages name the variable holding the DSN, never its value
(docs/postgres.md), so each piece of the value (the whole, each parameter's value, each word of it,
percent-decoded too) is masked in that text before it reaches a person or a log.

The host and port are left readable (a wrong port must be visible in "connection refused"); the user,
the database name and any option are masked. Pieces shorter than two characters are left alone (masking
every `a`, `5` or `h` a host or port is made of would cut the message apart), except the password: it is
masked whatever its length, as a whole word (decision 257), found by psycopg's parser, the URL's
userinfo, or a `password=` parameter or `//user:…@` of a DSN neither can read.
"""

from __future__ import annotations

import contextlib
import re
from urllib.parse import unquote, urlsplit

import psycopg

from klaw.redaction import MASK

_SEPARATORS = re.compile(r"[\s:/@?&=,;'\"]+")
_PASSWORD_PARAMETER = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]*)", re.IGNORECASE)
_USERINFO_PASSWORD = re.compile(r"//[^/\s:@]*:([^@\s/]*)@")  # also in a URL psycopg cannot read


def hide_connection_string(text: str, dsn: str) -> str:
    """`text` with the DSN and every piece of it replaced by the mask; pieces only as whole words, so a
    short value (a port, a host `db`) does not cut words of the message apart."""
    dsn = dsn.strip()
    if not dsn:
        return text
    for whole in sorted({dsn, unquote(dsn)}, key=len, reverse=True):
        text = text.replace(whole, MASK)
    for piece in sorted(_pieces(dsn), key=len, reverse=True):
        text = re.sub(rf"(?<![\w]){re.escape(piece)}(?![\w])", MASK, text)
    return text


def _pieces(dsn: str) -> set[str]:
    values = [dsn, unquote(dsn)]
    with contextlib.suppress(psycopg.Error):  # a malformed DSN: its words are masked all the same
        values += [str(v) for v in psycopg.conninfo.conninfo_to_dict(dsn).values() if v is not None]
    pieces = {p for value in values for p in (value, *_SEPARATORS.split(value)) if p}
    return {p for p in pieces if len(p) >= 2} - _address(dsn) | _passwords(dsn)


def _address(dsn: str) -> set[str]:
    """The server's host and port, left readable: not secrets, and a wrong port cannot be spotted in
    `connection to server at "••••••", port •••••• failed` (newcomer12)."""
    found: set[str] = set()
    with contextlib.suppress(psycopg.Error):
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
        for key in ("host", "hostaddr", "port"):
            found.update(piece for piece in str(parts.get(key) or "").split(",") if piece)
    return found


def _passwords(dsn: str) -> set[str]:
    """The DSN's password however it is written (and percent-decoded), of any length."""
    found: set[str] = set()
    with contextlib.suppress(psycopg.Error):
        found.add(str(psycopg.conninfo.conninfo_to_dict(dsn).get("password") or ""))
    with contextlib.suppress(ValueError):
        found.add(urlsplit(dsn).password or "")
    for pattern in (_PASSWORD_PARAMETER, _USERINFO_PASSWORD):
        found.update(match.group(1).strip("'") for match in pattern.finditer(dsn))
    return {q for p in found for q in (p, unquote(p)) if q}
