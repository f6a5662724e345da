"""`klaw bench summaries` end to end on a short script: the figures reach the screen and the JSON
file, the default settings make fewer requests than one per exchange at the same coverage, and a
setting that does not exist is refused in a sentence."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from klaw.bench.summary_bench import measure_summaries
from klaw.cli.app import app

TURNS = 20


async def test_the_defaults_make_fewer_requests_at_the_same_coverage(tmp_path: Path) -> None:
    alone = await measure_summaries(tmp_path / "alone", turns=TURNS, summarizer={"batchExchanges": 1})
    batched = await measure_summaries(tmp_path / "batched", turns=TURNS)
    for result in (alone, batched):
        assert result.exchanges == TURNS and result.facts > 0
        assert (result.exchanges_covered, result.facts_in_exchange_summaries, result.facts_in_segment_summary) == (
            1.0,
            1.0,
            1.0,
        )
    assert batched.calls_by_kind.get("exchanges", 0) > 0 and batched.calls_per_turn <= 0.5
    assert batched.calls < alone.calls


def test_the_command_prints_the_figures_and_writes_them_as_json(tmp_path: Path) -> None:
    out = tmp_path / "summaries.json"
    run = CliRunner().invoke(
        app, ["bench", "summaries", "--turns", "12", "--set", "batchExchanges=4", "--out", str(out)]
    )
    assert run.exit_code == 0, run.output
    assert "per turn" in run.output and "coverage" in run.output
    figures = json.loads(out.read_text())
    assert figures["turns"] == 12 and figures["summarizer"]["batchExchanges"] == 4
    assert figures["exchanges_covered"] == 1.0


def test_a_setting_that_does_not_exist_is_refused_in_a_sentence(tmp_path: Path) -> None:
    run = CliRunner().invoke(app, ["bench", "summaries", "--turns", "2", "--set", "batchExchange=4"])
    assert run.exit_code == 2
    assert "not a valid summarizer setting" in run.output and "batchExchange" in run.output
    assert "Traceback" not in run.output
