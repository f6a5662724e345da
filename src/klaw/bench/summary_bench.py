"""`klaw bench summaries`: background summarization calls per chat turn, and what the summaries cover.

The scripted conversation (`summary_script.py`) goes through the real engine (`klaw.Klaw`: log,
SQLite, turns, the summarizers as configured, the fake embedder) with the in-process bench model
(`summary_model.py`) answering both the turns and the summary requests, on a manual clock moved
`seconds_between_turns` after each turn (a person's pace: time-based batching sees the time pass).
After each turn and each clock move the summarizers are let rest, so the run does not depend on
the machine's speed. At the end `/new` closes the segment and its summaries are written to the end.

Figures:
- calls per turn: summary requests over the whole run (the closing fold included) / turns, and by kind;
- coverage, three shares that must stay 1.0: finished exchanges with an exchange summary; scripted
  codes found in their own exchange's summary; scripted codes found in the segment's final summary;
- lag: after each turn, the exchanges of the segment its rolling summary (the context's summary
  layer) does not cover yet, beside how many exchanges the sliding window holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from klaw.bench.summary_model import BenchModel
from klaw.bench.summary_script import ScriptedTurn, TurnKind, scripted_turns
from klaw.engine.clock import ManualClock
from klaw.engine.runtime import Engine
from klaw.library import Klaw
from klaw.llm.function_model import FunctionModel
from klaw.memory.summaries.service import SummarizerService
from klaw.store.records import ChatRef, ExchangeStatus

CHAT = "bench"
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class SummaryBenchResult:
    turns: int
    turns_by_kind: dict[str, int]
    seconds_between_turns: float
    summarizer: dict[str, Any]  # the summarizer settings in force
    calls: int  # summary requests over the whole run
    calls_per_turn: float
    calls_by_kind: dict[str, int]  # exchange (one per request), exchanges (a batch), segment
    exchanges: int
    exchanges_covered: float  # share of finished exchanges with an exchange summary
    facts: int
    facts_in_exchange_summaries: float  # share of scripted codes in their own exchange's summary
    facts_in_segment_summary: float  # share of scripted codes in the segment's final summary
    lag_p50: float  # exchanges the rolling segment summary does not cover yet, after each turn
    lag_max: int
    window_exchanges: int  # how many exchanges the sliding window holds (two messages each)


async def measure_summaries(
    root: Path,
    *,
    turns: int = 200,
    seconds_between_turns: float = 30.0,
    summarizer: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> SummaryBenchResult:
    """Run the scripted conversation on a new home at `root`; `summarizer` overrides settings of
    that section (engine.yaml names, e.g. {"batchExchanges": 1})."""
    script = scripted_turns(turns)
    model = BenchModel(script)
    clock = ManualClock()
    config = {
        "embedder": {"backend": "fake"},
        "processing": {"debounceMs": 0},
        "summarizer": {"enabled": True, **(summarizer or {})},
    }
    chat = ChatRef("library", CHAT)
    lags: list[int] = []
    async with Klaw(root, config=config, model=FunctionModel(model), clock=clock) as agent:
        engine = agent.engine
        service = engine.summarizer
        assert service is not None, "the summarizer is configured on"
        segment_id = (await engine.sessions.get_or_create(chat)).segment.id
        for number, turn in enumerate(script, start=1):
            await agent.ask(CHAT, turn.text)
            await service.wait_idle()
            lags.append(number - await _covered(engine, segment_id))
            await clock.advance(seconds_between_turns)
            await service.wait_idle()
            if progress:
                progress("turns", number, turns)
        await agent.ask(CHAT, "/new")
        await _settle(service, clock)
        result = await _coverage(engine, segment_id, script)
        settings = engine.config.summarizer.model_dump(by_alias=True)
    calls = model.background
    return SummaryBenchResult(
        turns=turns,
        turns_by_kind={kind.value: sum(1 for t in script if t.kind is kind) for kind in TurnKind},
        seconds_between_turns=seconds_between_turns,
        summarizer=settings,
        calls=calls,
        calls_per_turn=calls / turns if turns else 0.0,
        calls_by_kind={kind: n for kind, n in sorted(model.calls.items()) if kind != "chat"},
        lag_p50=float(np.percentile(lags, 50)) if lags else 0.0,
        lag_max=max(lags, default=0),
        window_exchanges=engine.config.context.sliding_window // 2,
        **result,
    )


async def _settle(service: SummarizerService, clock: ManualClock) -> None:
    """Until the summarizers rest with nothing left (the segment's final fold waits for the last
    exchange summaries, which may wake on the clock)."""
    for _ in range(3):
        await service.wait_idle()
        await clock.advance(1)
    await service.wait_idle()


async def _covered(engine: Engine, segment_id: int) -> int:
    summary = await engine.store.summaries.segment_summary(segment_id)
    return 0 if summary is None else summary.exchanges_covered


async def _coverage(engine: Engine, segment_id: int, script: list[ScriptedTurn]) -> dict[str, Any]:
    summaries = engine.store.summaries
    exchanges = sorted(
        (e for e in await engine.store.exchanges.for_segment(segment_id) if e.status is ExchangeStatus.COMPLETED),
        key=lambda e: e.id,
    )
    found = [await summaries.exchange_summary(e.id) for e in exchanges]
    texts = [summary.text if summary is not None else None for summary in found]
    segment = await summaries.segment_summary(segment_id)
    final = segment.text if segment is not None and segment.final else ""
    facts = [(turn.keyword, (texts[i] if i < len(texts) else None) or "") for i, turn in enumerate(script)]
    keyed = [(keyword, text) for keyword, text in facts if keyword is not None]
    return {
        "exchanges": len(exchanges),
        "exchanges_covered": _share(sum(1 for t in texts if t is not None), len(exchanges)),
        "facts": len(keyed),
        "facts_in_exchange_summaries": _share(sum(1 for keyword, text in keyed if keyword in text), len(keyed)),
        "facts_in_segment_summary": _share(sum(1 for keyword, _ in keyed if keyword in final), len(keyed)),
    }


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 1.0
