"""Core memory: a small JSON object of lasting facts that goes into every context.

Read on every turn (it is small), so an edit by a tool, a command or a person with an editor is
seen at once. A missing file is empty memory; an unreadable one is reported and treated as empty
rather than failing the turn.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class CoreMemory:
    def __init__(self, path: Path) -> None:
        self.path = path

    async def read(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._read)

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            log.warning("core memory %s is not valid JSON (line %d); treating it as empty", self.path, exc.lineno)
            return {}
        if not isinstance(data, dict):
            log.warning("core memory %s must hold a JSON object; treating it as empty", self.path)
            return {}
        return data

    @staticmethod
    def render(memory: dict[str, Any]) -> str:
        return json.dumps(memory, ensure_ascii=False, indent=2, sort_keys=True)
