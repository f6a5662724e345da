"""What every LoCoMo benchmark runs with: the embedder under test, a scratch directory for its stores,
and where its progress goes. `klaw bench locomo`, `past-sessions` and `recall` take one `Workbench`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from klaw.memory.embedder.protocol import Embedder

Progress = Callable[[str, int, int], None]
"""(stage, done, total); each benchmark names its stages."""


def _quiet(stage: str, done: int, total: int) -> None:
    """No progress shown (tests, scripts)."""


@dataclass(frozen=True, slots=True)
class Workbench:
    embedder: Embedder
    work_dir: Path  # a directory per store is created in it
    progress: Progress = _quiet

    def stages(self, totals: Mapping[str, int]) -> Callable[[str, int], None]:
        """`advance(stage, count)`: adds `count` to the stage's done and reports it against its total."""
        done = dict.fromkeys(totals, 0)

        def advance(stage: str, count: int) -> None:
            done[stage] += count
            self.progress(stage, done[stage], totals[stage])

        return advance
