"""The console's input history (`KLAW_HOME/chat_history`): slash commands on disk, messages in memory.

Up-arrow recalls what was typed, but a copy of message text in a second file would outlive
`/forget` and `klaw memory forget`, which erase a message from the log, the database and the
summaries. So only slash commands (`/new`, `/rag set …`) are written to the file; messages are
recalled within the session, and a `/forget` drops them from it too. A file written by an older klaw,
holding messages, is rewritten without them on first read.
(docs/decisions/060-console-history-keeps-commands-only.md)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit.history import FileHistory

from klaw.atomic_file import replace_file
from klaw.command_syntax import parse_command
from klaw.private_files import create_private


def is_command(text: str) -> bool:
    return parse_command(text) is not None


class ConsoleHistory(FileHistory):
    def __init__(self, path: Path) -> None:
        create_private(path)  # prompt_toolkit appends to it by name: 0600 from the start
        super().__init__(str(path))
        self._path = path

    def load_history_strings(self) -> Iterable[str]:
        strings = list(super().load_history_strings())  # newest first
        kept = [s for s in strings if is_command(s)]
        if len(kept) != len(strings):
            self._rewrite(reversed(kept))
        return kept

    def store_string(self, string: str) -> None:
        if is_command(string):
            super().store_string(string)

    def forget_messages(self) -> None:
        """Drop every message (not a command) from this session's history: after `/forget`, up-arrow
        must not bring back what was erased."""
        self._loaded_strings = [s for s in self._loaded_strings if is_command(s)]

    def _rewrite(self, oldest_first: Iterable[str]) -> None:
        """Replace the file with `oldest_first` (the commands), in FileHistory's format."""
        entries = ("\n# (kept command)\n" + "".join(f"+{line}\n" for line in s.split("\n")) for s in oldest_first)
        replace_file(self._path, "".join(entries).encode("utf-8"))
