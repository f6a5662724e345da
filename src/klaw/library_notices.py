"""What the library says in words of its own: a given `config=` overridden by chat commands stored in the
home's database (decision 290), and a message a full disk (adversary14) or a folder of the home made
unreadable (decision 466) kept out of the log. Kept apart
from library.py so that `Klaw` stays one screenful of the engine's use.
"""

from __future__ import annotations

import logging
from pathlib import Path

from klaw.command_syntax import parse_command
from klaw.disk_trouble import denied_words, mount_point
from klaw.engine.failures import is_disk_full, permission_denied
from klaw.engine.runtime import Engine

log = logging.getLogger("klaw.library")


def warn_overridden(engine: Engine) -> None:
    """A given `config=` is used as given, except the values chat commands stored in the home's database
    (`/rag set`, `/summarizer off`…), which override it as they override engine.yaml: said once, with how
    to undo them, so the program's author is not left wondering (decision 290)."""
    overrides = engine.memory_settings.overrides()
    if overrides:
        log.warning(
            "the config= given to Klaw is overridden by what chat commands stored in the home's database: %s;"
            " '/rag reset' gives rag back to the config (/summarizer and /embeddings switch theirs)",
            ", ".join(f"{field} = {value!r} ({command})" for field, value, command in overrides),
        )


def not_taken(home: Path, exc: Exception, text: str = "") -> str | None:
    """Why a message was not taken, in words, when a full disk or a folder klaw may not open kept it out of
    the log (a bare `OSError` or `PermissionError` from `ask` before); None for any other failure. A slash
    command (`text`) is said as one: "/forget … was not saved" read as if the conversation were lost."""
    if is_disk_full(exc):
        if (command := parse_command(text)) is not None:
            return not_done_disk_full(home, command.name)
        return not_taken_disk_full(home)
    if (denied := permission_denied(exc)) is not None:
        said = denied_words(Path(denied.filename), "then send it again")
        return f"Sorry, I could not take this message (it was not saved): {said}"
    return None


def not_done_disk_full(home: Path, command: str) -> str:
    """A command a full disk stopped (`/forget` among them: its tombstone is written first), decision 486."""
    return (
        f"Sorry, I could not carry out /{command}: the disk is full (no space left on {mount_point(home)}, which"
        f" holds klaw's home). Nothing was lost, and /{command} may not have taken effect. Free some space there"
        f" (df -h shows how much is left), then send /{command} again."
    )


def not_taken_disk_full(home: Path) -> str:
    """A message a full disk kept out of the log (adversary14: a bare `OSError: [Errno 28]` from `ask`)."""
    mount = mount_point(home)
    return (
        f"Sorry, I could not take this message: the disk is full (no space left on {mount}, which holds klaw's"
        " home), so it was not saved. Free some space there (df -h shows how much is left), then send it again."
    )
