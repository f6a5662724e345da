"""Whether engine.yaml has changed since the running engine read it, so `/tools`, `/status`, `klaw tools` and
`klaw config check` (the `config_file` query, decision 464) say "restart it to apply" instead of repeating a
fix the file already holds, or calling the file valid as if that settled it (newcomers 16 and 18, decision 445).

The note holds the very bytes the loader parsed the configuration from (`LoadedConfig.text`), handed to
`Engine.start` beside the config: noted again at the end of the start, an edit made while the engine started
(its plugins imported, its MCP servers started) was taken for what it runs on (check51, decision 474). A later
look reads the file again and, when the bytes differ, compares the two YAML documents parsed (an edited comment
or spacing changes nothing). A file that no longer parses counts as changed (the restart would refuse it:
`klaw config check` says why). An engine given its configuration by a program (`Klaw(config=…)`) or a bench
never read the file: it has no note.

A look happens on the event loop, so it reads only a regular file, at most the size the loader accepts, opened
without waiting (small_file.py): a FIFO put there froze the whole engine on `/status`, a symlink to /dev/zero
grew its memory without end (adversary25). Such a file is said plainly as one that cannot be read (decision 453).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klaw.config_loader import MAX_CONFIG_BYTES, LoadedConfig
from klaw.small_file import read_small, refused
from klaw.yaml_syntax import safe_load

CHANGED = "engine.yaml changed since klaw started: restart it to apply"
# Under `/tools`' and `klaw tools`' rows, which keep their own fixes (decision 489).
RESTART_UNDER_ROWS = f"{CHANGED} (the rows are what it loaded; a fix above that engine.yaml already holds applies then)"


@dataclass(slots=True)
class ConfigFileNote:
    """engine.yaml as the engine's configuration was read from it (`text` None: there was none)."""

    path: Path
    text: bytes | None

    @classmethod
    def of(cls, loaded: LoadedConfig) -> ConfigFileNote:
        """The note of the file `loaded` was parsed from, with the bytes parsed (not read again)."""
        return cls(loaded.path, loaded.text)

    def changed(self) -> bool:
        return self.look() is not None

    def look(self) -> str | None:
        """None: the file is as the engine read it; else `CHANGED`, or why it cannot be read now."""
        now, problem = _read(self.path)
        if problem is not None:
            return refused(self.path, problem, "a restart would fail: `klaw config check` says more")
        if now == self.text:
            return None
        try:
            same = _document(self.text) == _document(now)
        except Exception:  # no longer YAML (or not readable as text): what a restart would meet is not this
            same = False
        return None if same else CHANGED

    async def answer(self, _params: Mapping[str, Any]) -> dict[str, Any]:
        """The socket's `config_file` query: `{"changed": None}` when the file is as the engine read it, else
        what `look` says, so `klaw config check` can say the running engine needs a restart (decision 464)."""
        return {"changed": self.look()}

    def status_lines(self) -> list[str]:
        """`/status`'s line when the file changed or cannot be read."""
        said = self.look()
        return [] if said is None else [f"{said} (this status is what it loaded)"]


def _read(path: Path) -> tuple[bytes | None, OSError | None]:
    """The file's bytes (None: there is none, all defaults), or why it cannot be read."""
    try:
        return read_small(path, MAX_CONFIG_BYTES), None
    except FileNotFoundError:
        return None, None
    except OSError as exc:  # unreadable now (a FIFO, a device, too large, no permission): said as such
        return None, exc


def _document(text: bytes | None) -> Any:
    return None if text is None else (safe_load(text.decode("utf-8")) or None)
