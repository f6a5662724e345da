"""The web page's login token: random, kept in `KLAW_HOME/web_token` with mode 0600.

Created on the gateway's first start and reused after, so a bookmarked login keeps working;
deleting the file (and restarting) issues a new token and signs every browser out, since session
cookies are signed with a key derived from the token. Read as any small file of the home is
(`small_file.read_small`): a FIFO put there cannot hang the start, a link to /dev/zero cannot fill memory.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat

from klaw.home import KlawHome
from klaw.private_files import open_private, private_dirs
from klaw.small_file import read_small, refused

log = logging.getLogger(__name__)

TOKEN_BYTES = 32
MAX_TOKEN_FILE_BYTES = 4096  # a token is 43 characters; anything near this is not one of klaw's


def load_or_create_token(home: KlawHome) -> str:
    """The token in `web_token`, creating it (0600, never group/world readable) when missing or empty."""
    path = home.web_token_file
    private_dirs(home.root)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if stat.S_IMODE(mode) & 0o077:
            log.warning("%s was readable by others; restricting it to its owner (0600)", path)
            os.chmod(path, 0o600)
        try:
            token = read_small(path, MAX_TOKEN_FILE_BYTES).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise OSError(
                refused(
                    f"{path} (the web page's token)",
                    exc,
                    "remove it and start again: klaw makes a new token (every browser signs in again)",
                )
            ) from None
        if token:
            return token
        path.unlink()
    token = secrets.token_urlsafe(TOKEN_BYTES)
    fd = open_private(path, os.O_WRONLY | os.O_EXCL)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(token + "\n")
    return token
