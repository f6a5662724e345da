"""Retrieval of past conversations as a pipeline of small stages (docs/decisions/007-past-conversations-pipeline.md).

Each stage takes the `Retrieval` so far and returns it with its own part filled in; a stage that
finds nothing left to do marks it `done` and the later stages are skipped. Stages know nothing of
each other, so each is tested alone, and a pipeline is rebuilt without one (`without`) or with
another inserted (`Pipeline([...])`) without touching the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from klaw.config import RagConfig
from klaw.memory.hybrid_search import HybridHit
from klaw.store.records import ChatRef
from klaw.store.summaries.records import SummaryHit

if TYPE_CHECKING:  # a vector's type only: importing the engine loads no numpy until a vector is touched (520)
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class ShownExchange:
    """An exchange as the block shows it."""

    hit: SummaryHit
    started_at: datetime | None

    @property
    def exchange_id(self) -> int:
        return self.hit.summary.exchange_id or 0


@dataclass(frozen=True, slots=True)
class ShownSegment:
    """A past segment as the block shows it, with its messages found directly (best first) and its
    exchanges (most similar first). `by_messages`: found by its messages alone (its summary was
    not similar enough), so the block gives no similarity for it."""

    hit: SummaryHit
    started_at: datetime | None
    exchanges: tuple[ShownExchange, ...] = ()
    messages: tuple[HybridHit, ...] = ()
    by_messages: bool = False

    @property
    def segment_id(self) -> int:
        return self.hit.summary.segment_id


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What the stages pass along: the request, then each stage's findings."""

    chat: ChatRef
    current_segment_id: int
    query: str
    settings: RagConfig
    budget_tokens: int
    vector: npt.NDArray[np.float32] | None = None
    unknown_names: tuple[str, ...] = ()  # names the query asks about that the chat's past never said
    segments: tuple[SummaryHit, ...] = ()  # similar past segments, most similar first
    exchanges: tuple[SummaryHit, ...] = ()  # their similar exchanges, most similar first
    messages: tuple[HybridHit, ...] = ()  # past segments' messages found directly, best first
    message_segments: tuple[SummaryHit, ...] = ()  # the final summaries of the segments those are in
    shown: tuple[ShownSegment, ...] = ()  # what the block holds
    block: str | None = None
    done: bool = False
    skipped_by: str | None = field(default=None, compare=False)  # the stage that ended it early

    def replace(self, **changes: object) -> Retrieval:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def finish(self, stage: str) -> Retrieval:
        return dataclasses.replace(self, done=True, skipped_by=stage)


class Stage(Protocol):
    name: str

    async def __call__(self, retrieval: Retrieval) -> Retrieval: ...


class Pipeline:
    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = tuple(stages)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    def without(self, *names: str) -> Pipeline:
        """The same pipeline with the named stages switched off."""
        unknown = set(names) - set(self.names)
        if unknown:
            raise ValueError(f"no stage named {', '.join(sorted(unknown))}; stages: {', '.join(self.names)}")
        return Pipeline([stage for stage in self.stages if stage.name not in names])

    async def run(self, retrieval: Retrieval) -> Retrieval:
        for stage in self.stages:
            if retrieval.done:
                break
            retrieval = await stage(retrieval)
        return retrieval
