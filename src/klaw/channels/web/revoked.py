"""Sessions signed out before their cookie expires, kept so a copied cookie stops working at once.

Session cookies are signed and otherwise stateless (auth.py): without this list a cookie taken
from a browser would stay valid for its whole week after the person signed out. Signing out
records the cookie's nonce with its expiry; a revoked nonce is refused until then, after which the
signature check refuses the cookie anyway and the entry is dropped. The list lives in
`KLAW_HOME/web_revoked.json` (0600, replaced atomically), so a restarted gateway still refuses it;
without a path (tests, a throwaway app) it is kept in memory only. It stays small: one line per
sign-out in the last week.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from klaw.atomic_file import replace_file
from klaw.small_file import read_small, refused

log = logging.getLogger(__name__)
MAX_BYTES = 1 << 20  # a week of sign-outs is a few KiB
_FORGOTTEN = "earlier sign-outs are forgotten (remove it: klaw writes it again at the next sign-out)"


class RevokedSessions:
    def __init__(self, path: Path | None, clock: Callable[[], float]) -> None:
        self._path = path
        self._clock = clock
        self._revoked: dict[str, int] = self._load()

    def revoke(self, nonce: str, expiry: int) -> None:
        self._prune()
        self._revoked[nonce] = expiry
        if self._path is not None:
            replace_file(self._path, json.dumps(self._revoked).encode(), new_file_mode=0o600)

    def __contains__(self, nonce: str) -> bool:
        return nonce in self._revoked

    def _prune(self) -> None:
        now = self._clock()
        self._revoked = {nonce: expiry for nonce, expiry in self._revoked.items() if expiry >= now}

    def _load(self) -> dict[str, int]:
        if self._path is None:
            return {}
        try:
            data = json.loads(read_small(self._path, MAX_BYTES).decode("utf-8"))  # no FIFO waited on (453)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:
            # Unreadable: sign-outs recorded there are lost, which the log says; the gateway still starts.
            log.warning("%s", refused(self._path, exc, _FORGOTTEN))
            return {}
        if not isinstance(data, dict):
            log.warning("%s", refused(self._path, "not a JSON object", _FORGOTTEN))
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}
