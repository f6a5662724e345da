"""The system prompt: the workspace files that give the agent its character and instructions.

SOUL.md (character), IDENTITY.md (name and tone) and AGENTS.md (instructions) are joined in that
order. They are re-read when they change on disk (checked by modification time), so a person can
edit them while the engine runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

PROMPT_FILES = ("SOUL.md", "IDENTITY.md", "AGENTS.md")
FALLBACK_PROMPT = "You are a helpful personal assistant."


class SystemPrompt:
    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._cache: tuple[tuple[float, ...], str] | None = None

    async def text(self) -> str:
        return await asyncio.to_thread(self._load)

    def _load(self) -> str:
        paths = [self.workspace / name for name in PROMPT_FILES]
        stamps = tuple(p.stat().st_mtime if p.exists() else -1.0 for p in paths)
        if self._cache is not None and self._cache[0] == stamps:
            return self._cache[1]
        parts = [p.read_text(encoding="utf-8").strip() for p in paths if p.exists()]
        text = "\n\n".join(part for part in parts if part) or FALLBACK_PROMPT
        self._cache = (stamps, text)
        return text
