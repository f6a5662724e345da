"""The system prompt: the workspace files that give the agent its character and instructions.

SOUL.md (character), IDENTITY.md (name and tone) and AGENTS.md (instructions) are joined in that
order. They are re-read when they change on disk (checked by modification time), so a person can
edit them while the engine runs. `appendix` is what the engine itself adds after them (how to use
the docs tools, when they are offered).

They are read beneath the workspace (klaw/tools/beneath.py, decision 243): code run by `code_execute`
can put a symlink in place of a missing prompt file, and a file leading outside the workspace (the
web token, say) must not become part of every prompt sent to the model; it is left out, with a
warning naming the file.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from klaw.tools.beneath import open_directory, walk

log = logging.getLogger(__name__)

PROMPT_FILES = ("SOUL.md", "IDENTITY.md", "AGENTS.md")
FALLBACK_PROMPT = "You are a helpful personal assistant."


class SystemPrompt:
    def __init__(self, workspace: Path, appendix: str | None = None) -> None:
        self.workspace = workspace
        self._appendix = appendix
        self._cache: tuple[tuple[float, ...], str] | None = None

    async def text(self) -> str:
        return await asyncio.to_thread(self.text_now)

    def text_now(self) -> str:
        """`text` on the calling thread (file checks: not on the event loop)."""
        paths = [self.workspace / name for name in PROMPT_FILES]
        stamps = tuple(p.stat().st_mtime if p.exists() else -1.0 for p in paths)
        if self._cache is not None and self._cache[0] == stamps:
            return self._cache[1]
        parts = [_read_beneath(self.workspace, p.name).strip() for p in paths if p.exists()]
        text = "\n\n".join(part for part in parts if part) or FALLBACK_PROMPT
        if self._appendix:
            text = f"{text}\n\n{self._appendix}"
        self._cache = (stamps, text)
        return text


def _read_beneath(workspace: Path, name: str) -> str:
    """The prompt file `name` read through a descriptor opened beneath the workspace; "" when it leads
    outside (warned) or is gone meanwhile. A folder or undecodable file raises, as before."""
    root_path = workspace.resolve()
    root = open_directory(root_path)
    try:
        found = walk(root, root_path, name)
        try:
            fd = found.open(os.O_RDONLY | os.O_NONBLOCK)
        finally:
            found.close()
    except PermissionError as exc:
        if exc.errno is not None:
            raise
        log.warning("%s leads outside the workspace (a symlink?); it is left out of the system prompt", name)
        return ""
    except FileNotFoundError:
        return ""
    finally:
        os.close(root)
    with os.fdopen(fd, "rb") as file:
        os.set_blocking(fd, True)
        return file.read().decode("utf-8")
