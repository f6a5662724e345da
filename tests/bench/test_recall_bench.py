"""`klaw bench recall` on `tests/fixtures/recall_tiny.json` (invented), with the 32-dim fake embedder and
a sliding window of 2 messages, so what each block holds follows from the product's rules:

- tiny-a #0 "Zorblax?": the name is said once, written as a name, so the words open auto-RAG's gate
  although the fake embedder puts the one-word question far from the message;
- tiny-a #1: the evidence is the last message, in the window: in the context without any block;
- chit-chat injects nothing; tiny-b's question, asked of tiny-a, shares no word with it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from klaw.bench.locomo.annotations import load_session_notes
from klaw.bench.locomo.dataset import load_locomo
from klaw.bench.locomo.recall_bench import Asked, RecallRun, RecallSettings, run_recall
from klaw.bench.locomo.recall_report import groups, to_json, to_markdown
from klaw.bench.locomo.workbench import Workbench
from klaw.memory.embedder.fake import FakeEmbedder
from tests.cli.klaw_here import klaw_here

FIXTURE = Path(__file__).parent.parent / "fixtures" / "recall_tiny.json"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RecallRun:
    dataset = load_locomo(FIXTURE)
    notes = load_session_notes(FIXTURE, dataset)
    settings = RecallSettings(sliding_window=2)
    bench = Workbench(FakeEmbedder(dim=32), tmp_path_factory.mktemp("recall"))
    return asyncio.run(run_recall(dataset, notes, bench, settings))


def asked(run: RecallRun, layer: str, sample_id: str, kind: str = "question") -> list[Asked]:
    return [a for a in run.asked if a.layer == layer and a.sample_id == sample_id and a.kind == kind]


def test_a_rare_name_reaches_the_auto_rag_block_and_window_evidence_counts_as_in_context(run: RecallRun) -> None:
    name, window, _ = asked(run, "auto_rag", "tiny-a")
    assert name.in_block == ("D1:1",) and name.injected
    assert window.in_window == ("D2:4",) and window.in_block == ()


def test_negatives_inject_nothing(run: RecallRun) -> None:
    for layer in ("auto_rag", "past"):
        chit = asked(run, layer, "tiny-a", "chit-chat")
        other = asked(run, layer, "tiny-a", "other conversation")
        assert len(chit) > 10 and not any(a.injected for a in chit)
        assert [a.kind for a in other] == ["other conversation"] and not other[0].injected


def test_every_question_and_negative_is_asked_of_each_layer(run: RecallRun) -> None:
    for layer in ("auto_rag", "past"):
        assert len(asked(run, layer, "tiny-a")) == 3 and len(asked(run, layer, "tiny-b")) == 1
        assert len(asked(run, layer, "tiny-b", "other conversation")) == 3


def test_figures_per_category_and_negatives_in_json_and_markdown(run: RecallRun) -> None:
    rows = groups(run.asked, "auto_rag")
    assert rows["categories 1–4"]["questions"] == 4
    assert rows["chit-chat"]["false_injection"] == 0.0
    figures = to_json(run)
    assert figures["settings"]["autoRag"]["topK"] == run.settings.auto_rag.top_k
    assert set(figures["layers"]) == {"auto_rag", "past"}
    markdown = to_markdown(run)
    assert "| chit-chat |" in markdown and "| categories 1–4 | 4 |" in markdown


def test_cli_writes_json_and_markdown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    out = tmp_path / "out"
    result = klaw_here(home, "bench", "recall", "--data", str(FIXTURE), "--out", str(out), "--layers", "auto_rag")
    assert result.returncode == 0, result.stderr
    assert set(json.loads((out / "recall.json").read_text())["layers"]) == {"auto_rag"}
    assert "Auto-RAG" in (out / "recall.md").read_text()
    bad = klaw_here(home, "bench", "recall", "--data", str(FIXTURE), "--layers", "nope")
    assert bad.returncode != 0 and "layers must be" in bad.stdout + bad.stderr and "Traceback" not in bad.stderr
