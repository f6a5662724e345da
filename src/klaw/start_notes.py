"""What `klaw serve` and `klaw engine` say on a terminal while they start, as it happens (decision 513).

newcomer22 watched `klaw serve` say nothing for ~10 s on a loaded machine, and more on the first start after an
upgrade: the starting line came only once the command line had loaded (a second or more of imports), and nothing
said what the rest of the wait was (the engine's modules loading, klaw.db moved to a newer schema, the embedder
loading). So the `klaw` entry point says the starting line before it imports anything else (`say_at_once`), and
the slow steps say a line each as they begin (`note`): loading the engine, a schema migration, the embedder's load.
All of it on stderr and only when stderr is a terminal, as decision 445 has it: stdout is what scripts read (the
ready line, the web page's address), and a journal or a program reading stderr gets the one clear error alone.
Nothing is said by any other command, nor by a library program (`note` is silent until `say_at_once` said the
line). Imports nothing of klaw but `home`, so the entry point stays light.
"""

from __future__ import annotations

import os
import sys

from klaw.home import KlawHome

STARTING = ("serve", "engine")  # the long-running starts that say so; `chat` has its own prompt and spinner
_said: list[str] = []  # the command whose starting line was said at a terminal, once per process


def say_at_once(argv: list[str]) -> None:
    """The starting line of `klaw serve` or `klaw engine`, said before the command line loads, at a terminal."""
    words = [word for word in argv[1:] if not word.startswith("-")]
    if not words or words[0] not in STARTING or "--help" in argv or not _terminal():
        return
    try:
        root = KlawHome.from_env().root
    except (OSError, ValueError):  # the command itself says what is wrong with the home
        return
    said_starting(f"klaw {words[0]}", root)


def said_starting(command: str, root: object) -> None:
    """Say `command`'s starting line on stderr (once: the entry point may have said it already)."""
    if _said:
        return
    _said.append(command)
    _write(f"{command} starting on {root}… (it says when it is ready)")


def note(text: str) -> None:
    """One step of a start that may take a while ("moving klaw.db to schema version 15…"), said only after the
    starting line was said at a terminal."""
    if _said:
        _write(f"  {text}…")


def _terminal() -> bool:
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, ValueError, OSError):  # replaced by something without a descriptor (a test's capture)
        return False


def _write(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a terminal gone: the start goes on without its words
        pass
