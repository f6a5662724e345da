"""The system prompt: the workspace files that give the agent its character and instructions.

SOUL.md (character), IDENTITY.md (name and tone) and AGENTS.md (instructions) are joined in that
order. They are re-read when they change on disk (checked by modification time), so a person can
edit them while the engine runs. `appendix` is what the engine itself adds after them (how to use
the docs tools, when they are offered).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

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
        parts = [p.read_text(encoding="utf-8").strip() for p in paths if p.exists()]
        text = "\n\n".join(part for part in parts if part) or FALLBACK_PROMPT
        if self._appendix:
            text = f"{text}\n\n{self._appendix}"
        self._cache = (stamps, text)
        return text
