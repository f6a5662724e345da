"""Whether engine.yaml has changed since the running engine read it, so `/tools`, `/status` and `klaw tools`
say "restart it to apply" instead of repeating a fix the file already holds (newcomer16, decision 445).

The file's bytes are noted when the engine is assembled; a later look reads the file again and, when the bytes
differ, compares the two YAML documents parsed (an edited comment or spacing changes nothing). A file that no
longer parses counts as changed (the restart would refuse it: `klaw config check` says why). An engine given
its configuration by a program (`Klaw(config=…)`) never read the file: its note is switched off.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klaw.yaml_syntax import safe_load

CHANGED = "engine.yaml changed since klaw started: restart it to apply"
RESTART_FIRST = "engine.yaml changed since klaw started: restart klaw to apply it, then look again"


@dataclass(slots=True)
class ConfigFileNote:
    """engine.yaml as the engine read it at start (None: there was none)."""

    path: Path
    text: bytes | None
    watched: bool = True

    @classmethod
    def taken(cls, path: Path) -> ConfigFileNote:
        return cls(path, _read(path))

    def ignore(self) -> None:
        """The engine's configuration did not come from the file: its edits do not concern it."""
        self.watched = False

    def changed(self) -> bool:
        if not self.watched:
            return False
        now = _read(self.path)
        if now == self.text:
            return False
        try:
            return bool(_document(self.text) != _document(now))
        except Exception:  # no longer YAML (or not readable as text): what a restart would meet is not this
            return True

    def status_lines(self) -> list[str]:
        """`/status`'s line when the file changed."""
        return [f"{CHANGED} (this status is what it loaded)"] if self.changed() else []


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # missing (all defaults), or unreadable now: compared as such
        return None


def _document(text: bytes | None) -> Any:
    return None if text is None else (safe_load(text.decode("utf-8")) or None)
