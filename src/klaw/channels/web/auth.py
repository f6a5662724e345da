"""Sign-in for the web page: the token once, then a signed session cookie and CSRF tokens.

The person types the token (printed when the gateway starts, kept in `KLAW_HOME/web_token`) into
the login form. A valid token gets a session cookie `klaw_session` = `<expiry>.<nonce>.<signature>`:
HttpOnly (scripts cannot read it), SameSite=Strict (other sites' pages never send it), signed with
HMAC-SHA256 under a key derived from the token, so no session state is kept and a new token
signs everyone out. Signing out revokes the cookie on the server too (revoked.py), so a copy of it
stops working at once rather than at its expiry. Every state-changing request carries a CSRF token bound to the session
(HMAC of the cookie) in the `X-CSRF-Token` header or a `csrf` form field; the login form itself
is protected the same way by a short-lived pre-session cookie. All comparisons are constant-time.

A script skips the form: `Authorization: Bearer <token>` on `/api/…` stands for a session
(decision 247). It needs no CSRF token: a browser never adds that header on its own, so another
site's page cannot make one carry it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from klaw.ascii_digits import digits
from klaw.channels.web.revoked import RevokedSessions

SESSION_COOKIE = "klaw_session"
LOGIN_COOKIE = "klaw_login"
CSRF_HEADER = "x-csrf-token"
SESSION_SECONDS = 7 * 24 * 3600
LOGIN_SECONDS = 3600


class WebAuth:
    def __init__(self, token: str, clock: Callable[[], float] = time.time, revoked_file: Path | None = None) -> None:
        self._token = token.encode()
        self._key = hmac.new(self._token, b"klaw web session key", hashlib.sha256).digest()
        self._clock = clock
        self._revoked = RevokedSessions(revoked_file, clock)

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    def check_token(self, typed: str) -> bool:
        return hmac.compare_digest(typed.strip().encode(), self._token)

    def valid_bearer(self, header: str | None) -> bool:
        """`Authorization: Bearer <the token>` (the scheme's name in any case)."""
        scheme, _, given = (header or "").partition(" ")
        return scheme.lower() == "bearer" and bool(given) and self.check_token(given)

    def new_session(self) -> str:
        return self._signed("session", SESSION_SECONDS)

    def valid_session(self, cookie: str | None) -> bool:
        return self._valid("session", cookie) and cookie is not None and cookie.split(".")[1] not in self._revoked

    def revoke_session(self, cookie: str) -> None:
        """Sign this cookie out for good (until it would have expired anyway)."""
        if self._valid("session", cookie):
            expiry, nonce, _ = cookie.split(".")
            self._revoked.revoke(nonce, int(expiry))

    @property
    def outbox_key(self) -> str:
        """The name the page keeps its unsent messages under in the browser's storage (decision 473): one per
        token, so a new token (another home on the same address) sends nothing typed for the old one; it
        reveals nothing of the token."""
        return self._mac("outbox", "")[:16]

    def csrf_for(self, cookie: str) -> str:
        """The CSRF token of a session (or of a login form's pre-session cookie)."""
        return self._mac("csrf", cookie)

    def valid_csrf(self, cookie: str | None, presented: str | None) -> bool:
        if not cookie or not presented:
            return False
        return _same(self.csrf_for(cookie), presented)

    def new_login_nonce(self) -> str:
        return self._signed("login", LOGIN_SECONDS)

    def valid_login_nonce(self, cookie: str | None) -> bool:
        return self._valid("login", cookie)

    def _signed(self, purpose: str, lifetime: int) -> str:
        body = f"{int(self._clock()) + lifetime}.{secrets.token_urlsafe(16)}"
        return f"{body}.{self._mac(purpose, body)}"

    def _valid(self, purpose: str, value: str | None) -> bool:
        if not value or value.count(".") != 2:
            return False
        body, _, signature = value.rpartition(".")
        expiry = body.partition(".")[0]
        if not digits(expiry, 12) or int(expiry) < self._clock():
            return False
        return _same(self._mac(purpose, body), signature)

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self._key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def _same(expected: str, given: str) -> bool:
    """`hmac.compare_digest` of two texts as bytes: of str it raises TypeError when one holds a character
    outside ASCII (a forged cookie or CSRF field `é`: HTTP 500 before sign-in, adversary21)."""
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))
