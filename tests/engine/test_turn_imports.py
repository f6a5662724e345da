"""A turn looks for no module on disk once the engine has answered its first message.

An import of a module that is not loaded searches every folder of `sys.path`; one that always fails
searches them again every time. httpcore asks for `sniffio` on every request of a model call (and
falls back to asyncio when it is missing), which cost ~0.6 ms of the event loop a try on this machine
and several tries a call, until klaw depended on it. Watched with a finder first on `sys.meta_path`,
which sees every import not already loaded, over turns through the whole engine.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

from tests.engine.harness import running_engine


class _Watch:
    """Notes the name of every import that reaches the finders, and finds nothing itself."""

    def __init__(self) -> None:
        self.looked_for: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.looked_for.append(fullname)
        return None


async def test_turns_after_the_first_import_nothing(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("hello")  # the first turn may load what it uses
        watch = _Watch()
        sys.meta_path.insert(0, watch)
        try:
            for text in ("how are you?", "and the garden?"):
                await h.turn(text)
        finally:
            sys.meta_path.remove(watch)
        assert watch.looked_for == []
