"""`klaw chat`'s piped input (`echo "…" | klaw chat`) as one message, or why it cannot be one.

Read as bytes and decoded as strict UTF-8 here: Python's own decoding of stdin raised on bytes that
are not UTF-8 (a traceback), or under the C locale turned them into lone surrogates that failed
later, in the log's write. Empty input is refused too: `klaw chat < /dev/null` drew a banner and blank
prompts into the pipe and exited 0, as if something had been said. The size and text rule is the
engine's (`klaw/message_text.py`), asked here only to word the answer for a pipe. Decision:
docs/decisions/240-bad-input-at-the-engine.md.
"""

from __future__ import annotations

import functools
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


def said_without_engine(piped: str, commands: Iterable[Described], skills: tuple[Path, int] | None = None) -> bool:
    """Print what `klaw chat` answers to a piped command before any engine, in process or attached (decision
    431): a typo on stderr, exit 1 (a script's typo must not pass), `/help` on stdout. True when it did.
    A skill's name (`skills`: the skills folder and the largest file a skill may hold; None: skills off) calls
    it: the engine runs its turn (decision 529)."""
    from klaw.channels.console import answered_without_engine  # the console loads only when a chat runs

    usable, callable_skills, skipped = _skills_in(skills)
    early = answered_without_engine(piped, commands, usable, callable_skills, skipped)
    if early is None:
        return False
    said, answered = early
    if not answered:
        err_console.print(Text(visible(said), style="red"), highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    shown = stdout_console()
    shown.out(visible(said) if shown.is_terminal else said, highlight=False)
    return True


def skills_folder(home: KlawHome, config: EngineConfig) -> tuple[Path, int] | None:
    """The home's skills folder and tools.skills.maxFileBytes when the `skills` group is enabled; None when
    skills are off."""
    return (home.skills_dir, config.tools.skills.max_file_bytes) if "skills" in config.tool_groups else None


def _skills_in(
    skills: tuple[Path, int] | None,
) -> tuple[Callable[[], list[str]], Callable[[], dict[str, str]], Callable[[], tuple[str, ...]]]:
    """The skills folder's usable skills' names, those a person may call by name, and the folders a rule left out
    (decision 543), checked as the engine and `klaw skills check` check them (decision 536: a folder with any
    SKILL.md was listed by `/help`, one the engine leaves out too). Scanned once, when first asked: only a piped
    command asks."""
    if skills is None:
        return list, dict, tuple
    folder, max_bytes = skills

    @functools.cache
    def scanned() -> tuple[list[str], dict[str, str], tuple[str, ...]]:
        from klaw.tools.skills.catalogue import scan_skills  # reads each SKILL.md: only for a piped command

        scan = scan_skills(folder, max_bytes=max_bytes)
        found = scan.skills.values()  # /help says each one's description (540)
        return [s.name for s in found], {s.name: s.summary for s in found if s.user_invocable}, scan.skipped

    return (lambda: scanned()[0]), (lambda: scanned()[1]), (lambda: scanned()[2])
