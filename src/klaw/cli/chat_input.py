"""`klaw chat`'s piped input (`echo "…" | klaw chat`) as one message, or why it cannot be one.

Read as bytes and decoded as strict UTF-8 here: Python's own decoding of stdin raised on bytes that
are not UTF-8 (a traceback), or under the C locale turned them into lone surrogates that failed
later, in the log's write. Empty input is refused too: `klaw chat < /dev/null` drew a banner and blank
prompts into the pipe and exited 0, as if something had been said. The size and text rule is the
engine's (`klaw/message_text.py`), asked here only to word the answer for a pipe. Decision:
docs/decisions/240-bad-input-at-the-engine.md.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from klaw.cli.context import err_console, stdout_console
from klaw.command_syntax import Described
from klaw.message_text import message_problem
from klaw.terminal_text import visible

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.home import KlawHome


def read_piped() -> bytes | None:
    """All of stdin when it is not a terminal; None at a terminal (the console's prompt reads it)."""
    return None if sys.stdin.isatty() else sys.stdin.buffer.read()


def piped_message(data: bytes) -> tuple[str, str | None]:
    """The message `data` holds, and why it cannot be sent (None when it can); never its content."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "", (
            f"the input is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start:,} is not valid"
            " UTF-8); klaw chat takes a text message: convert it first, e.g. iconv -f latin1 -t utf-8 FILE | klaw chat"
        )
    text = text.strip()
    if not text:
        return "", (
            'nothing to send: the input is empty; pipe a message in (echo "hello" | klaw chat),'
            " or run klaw chat at a terminal"
        )
    problem = message_problem(text)
    return text, None if problem is None else f"the message {problem}"


def said_without_engine(piped: str, commands: Iterable[Described], skills_dir: Path | None = None) -> bool:
    """Print what `klaw chat` answers to a piped command before any engine, in process or attached (decision
    431): a typo on stderr, exit 1 (a script's typo must not pass), `/help` on stdout. True when it did.
    A skill's name (`skills_dir` holds it; None: skills off) calls it: the engine runs its turn (decision 529)."""
    from klaw.channels.console import answered_without_engine  # the console loads only when a chat runs

    early = answered_without_engine(piped, commands, _skill_in(skills_dir))
    if early is None:
        return False
    said, answered = early
    if not answered:
        err_console.print(Text(visible(said), style="red"), highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    shown = stdout_console()
    shown.out(visible(said) if shown.is_terminal else said, highlight=False)
    return True


def skills_folder(home: KlawHome, config: EngineConfig) -> Path | None:
    """The home's skills folder when the `skills` group is enabled; None when skills are off."""
    return home.skills_dir if "skills" in config.tool_groups else None


def _skill_in(skills_dir: Path | None) -> Callable[[], list[str]]:
    """The skills folder's skill names, its folders holding a SKILL.md, looked at without reading them (no
    engine runs: the skills are not scanned); a name a skill could not have (skill_files.NAME) is none."""
    if skills_dir is None:
        return list

    def names() -> list[str]:
        try:
            entries = sorted(skills_dir.iterdir())
        except OSError:
            return []
        return [
            entry.name
            for entry in entries
            if re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry.name) is not None and (entry / "SKILL.md").is_file()
        ]

    return names
