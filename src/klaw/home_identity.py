"""Which home this is, wherever it lies: a random id kept in `KLAW_HOME/home-id` (0600), made at the first
start on PostgreSQL, and the place (`host:folder`) it runs from now (decision 539).

Several homes may share one PostgreSQL database (docs/postgres.md, "Several engines, one database"), so a
database used by another home is no fault. A *copy* of one home is: newcomer24 restored a PostgreSQL home's
archive into another folder and started it; both engines answered from the one memory and a scheduled task ran
twice. `klaw backup` packs `home-id` and `klaw restore` keeps it, so a copy has its original's id in another
place, and the database tells the two apart: the engines' leases carry id and place, and `home_places` the
place each id last started from. Imports nothing of klaw but `home`, `private_files` and `small_file`.
"""

from __future__ import annotations

import re
import socket
import uuid

from klaw.home import KlawHome
from klaw.private_files import write_private
from klaw.small_file import read_small

HOME_ID_FILE = "home-id"
_ID = re.compile(r"[0-9a-f]{32}")


def home_identity(home: KlawHome) -> tuple[str, str]:
    """(`id`, `place`): the home's id, made now when it has none (or one that is not an id), and
    `host:folder` of this start. Blocking: a small file read or written."""
    path = home.root / HOME_ID_FILE
    try:
        text = read_small(path, 100).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    if not _ID.fullmatch(text):
        text = uuid.uuid4().hex
        write_private(path, f"{text}\n".encode("ascii"))
    return text, f"{socket.gethostname()}:{home.root.resolve()}"
