"""The whole LoCoMo bench on `tests/fixtures/locomo_tiny.json`, every figure against hand-computed values.

How the fixture makes every rank provable with the 32-dim fake embedder (whose order among unrelated
texts is hash noise):

- Turns of 37 characters or more are embedded (≥ 10 approximate tokens, the product default);
  shorter turns are full text only. tiny-1 embeds D1:1 D1:3 D2:2 D3:5, tiny-2 D1:1 D2:1 D3:1.
- A question that repeats an embedded turn verbatim has cosine 1 with it: vector rank 1. Its
  content words occur in that turn only (speakers Will, Don, Shan are FTS stop words), so it is
  full-text rank 1 too.
- Every other evidence turn is short (never in the vector list) and is the only full-text match,
  or a match at a known bm25 position (the four "kettle" turns differ only in length: shorter
  first).
- Full text also indexes each turn with the turns before and after it (the `context` and
  `following` columns, weight 0.2), so the turns right after and before a matching turn match too,
  below it: tiny-1 #1 finds D1:3, then D2:1 and D1:2 (after and before D1:3), then D2:3; the kettle
  turns D3:2–D3:5 each also follow a kettle turn.
- Hybrid (search defaults: 0.4 vector + 0.6 full text, each rescaled to 0.1..1 over its candidates,
  then 0.4 / 0.2 of a candidate's score lent to the turns 1 / 2 away): a verbatim question's turn is
  both sides' best, scores 1 plus what its neighbours lend, and ranks first; a turn that is the only
  full-text match scores 0.6 plus its neighbours' share. Positions below those depend on the fake
  embedder's cosines between unrelated texts (deterministic hashes, not derivable by hand): they are
  the observed ones, explained per row (v: vector candidate, n: there as a neighbour).
- Each conversation has at most 5 sessions, so session recall@5 is "is the evidence's session in
  the ranking at all"; the vector ranking holds every embedded turn.

Per question (r5, r10, r25, r50, all_hit10, mrr50, ndcg10, session_r5; R@1 and R@3 follow from the
evidence ranks, checked on their own):
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from klaw.bench.locomo.dataset import load_locomo
from klaw.bench.locomo.metrics import METRIC_NAMES, MeanScores
from klaw.bench.locomo.report import to_json, to_markdown
from klaw.bench.locomo.runner import LocomoRun, RunSettings, run_locomo
from klaw.bench.locomo.workbench import Workbench
from klaw.config import DatabaseConfig
from klaw.memory.embedder.fake import FakeEmbedder
from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.pg_server import PgServer

FIXTURE = Path(__file__).parent.parent / "fixtures" / "locomo_tiny.json"

G2 = 1 / math.log2(3)  # DCG of one hit at position 2
G4 = 1 / math.log2(5)
N1 = 1 / (1 + G2)  # 2 evidence turns, only one found, at position 1
N4 = (1 + G4) / (1 + G2)  # 2 evidence turns at positions 1 and 4
N6 = (1 + 1 / math.log2(7)) / (1 + G2)  # 2 evidence turns at positions 1 and 6
HAND = tuple(name for name in METRIC_NAMES if name not in ("r1", "r3"))  # the figures of the tables below

ONES = (1, 1, 1, 1, 1, 1, 1, 1)
MISSED_SESSION_FOUND = (0, 0, 0, 0, 0, 0, 0, 1)  # evidence absent, but its session ranked

# (sample_id, qa index) → category, and per variant the hand-derived figures.
CATEGORY = {
    ("tiny-1", 0): 4,
    ("tiny-1", 1): 1,
    ("tiny-1", 2): 2,
    ("tiny-1", 3): 5,
    ("tiny-1", 5): 2,
    ("tiny-2", 0): 4,
    ("tiny-2", 1): 1,
    ("tiny-2", 2): 2,
    ("tiny-2", 3): 3,
    ("tiny-2", 5): 4,
}
EXPECTED: dict[str, dict[tuple[str, int], tuple[float, ...]]] = {
    "vector": {
        ("tiny-1", 0): ONES,  # verbatim D1:1
        ("tiny-1", 1): (0.5, 0.5, 0.5, 0.5, 0, 1, N1, 1),  # verbatim D1:3 found; D2:3 is short
        ("tiny-1", 2): MISSED_SESSION_FOUND,  # D2:1 short; session 2 has D2:2
        ("tiny-1", 3): MISSED_SESSION_FOUND,  # D1:2 short; session 1 has D1:1
        ("tiny-1", 5): MISSED_SESSION_FOUND,  # D3:4 short; session 3 has D3:5
        ("tiny-2", 0): ONES,
        ("tiny-2", 1): (0.5, 0.5, 0.5, 0.5, 0, 1, N1, 1),
        ("tiny-2", 2): MISSED_SESSION_FOUND,
        ("tiny-2", 3): ONES,
        ("tiny-2", 5): MISSED_SESSION_FOUND,
    },
    "fts": {
        ("tiny-1", 0): ONES,
        # D1:3 (all words), D2:1 and D1:2 (after and before it), D2:3 ("brass")
        ("tiny-1", 1): (1, 1, 1, 1, 1, 1, N4, 1),
        ("tiny-1", 2): ONES,  # "share" + "zeppelin" only in the caption of D2:1
        ("tiny-1", 3): ONES,
        ("tiny-1", 5): (1, 1, 1, 1, 1, 0.25, G4, 1),  # 4th of the kettle turns
        ("tiny-2", 0): ONES,
        ("tiny-2", 1): ONES,
        ("tiny-2", 2): ONES,
        ("tiny-2", 3): ONES,
        ("tiny-2", 5): (0, 0, 0, 0, 0, 0, 0, 0),  # no word matches: empty ranking
    },
    "hybrid": {
        ("tiny-1", 0): ONES,
        # D1:3; its neighbours D2:1 D1:2 (n), D2:2 D1:1 (v, also neighbours); then D2:3, full text's worst.
        ("tiny-1", 1): (0.5, 1, 1, 1, 1, 1, N6, 1),
        # D2:1, the only full-text match: a short turn (decision 209: its score × n / (n + 3)), but the
        # only one holding the question's words (decision 232: × 1 + 0.75 × their share): first.
        ("tiny-1", 2): ONES,
        # D1:2 likewise, but it asks ("New pendulum spring?"): it lends its whole score to its reply D1:3,
        # which also matches "pendulum" through the words of the turn before it, and ranks first; being
        # short and asking, D1:2 comes third (decision 209).
        ("tiny-1", 3): (1, 1, 1, 1, 1, 1 / 3, 0.5, 1),
        ("tiny-1", 5): (1, 1, 1, 1, 1, 1 / 3, 0.5, 1),  # the kettle turns first, D3:4 third (the longer first)
        ("tiny-2", 0): ONES,
        # D3:1, then D3:2 (its own "pottery" and the words of D3:1 before it) above D2:3 (only the
        # words of D3:1 after it, and what D3:1 lends)
        ("tiny-2", 1): ONES,
        ("tiny-2", 2): ONES,
        ("tiny-2", 3): ONES,
        # No word matches: the three vector turns, then D1:2 as D1:1's neighbour (was not found before).
        ("tiny-2", 5): (1, 1, 1, 1, 1, 0.25, G4, 1),
    },
}
EVIDENCE_RANKS: dict[str, dict[tuple[str, int], tuple[int | None, ...]]] = {
    "vector": {("tiny-1", 1): (1, None), ("tiny-1", 5): (None,)},
    "fts": {("tiny-1", 1): (1, 4), ("tiny-1", 5): (4,), ("tiny-2", 5): (None,)},
    "hybrid": {
        ("tiny-1", 1): (1, 6),
        ("tiny-1", 2): (1,),
        ("tiny-1", 3): (3,),
        ("tiny-1", 5): (3,),
        ("tiny-2", 1): (1, 2),
    },
}

# Means, worked out by hand from the table above: (n, r5, r10, r25, r50, all_hit10, mrr50, ndcg10, session_r5).
HEADLINE = {  # categories 1–4: 9 questions (tiny-1 #3 is category 5)
    "vector": (9, 4 / 9, 4 / 9, 4 / 9, 4 / 9, 3 / 9, 5 / 9, (3 + 2 * N1) / 9, 1),
    "fts": (9, 8 / 9, 8 / 9, 8 / 9, 8 / 9, 8 / 9, 7.25 / 9, (6 + N4 + G4) / 9, 8 / 9),
    "hybrid": (9, 8.5 / 9, 1, 1, 1, 1, (7 + 7 / 12) / 9, (6.5 + N6 + G4) / 9, 1),
}
OVERALL = {  # all 10 scored questions
    "vector": (10, 0.4, 0.4, 0.4, 0.4, 0.3, 0.5, (3 + 2 * N1) / 10, 1),
    "fts": (10, 0.9, 0.9, 0.9, 0.9, 0.9, 0.825, (7 + N4 + G4) / 10, 0.9),
    "hybrid": (10, 0.95, 1, 1, 1, 1, (7 + 11 / 12) / 10, (7 + N6 + G4) / 10, 1),
}
BY_CATEGORY: dict[str, dict[int, tuple[float, ...]]] = {
    "vector": {
        1: (2, 0.5, 0.5, 0.5, 0.5, 0, 1, N1, 1),
        2: (3, 0, 0, 0, 0, 0, 0, 0, 1),
        3: (1, 1, 1, 1, 1, 1, 1, 1, 1),
        4: (3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 1),
        5: (1, 0, 0, 0, 0, 0, 0, 0, 1),
    },
    "fts": {
        1: (2, 1, 1, 1, 1, 1, 1, (1 + N4) / 2, 1),
        2: (3, 1, 1, 1, 1, 1, 0.75, (2 + G4) / 3, 1),
        3: (1, 1, 1, 1, 1, 1, 1, 1, 1),
        4: (3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3),
        5: (1, 1, 1, 1, 1, 1, 1, 1, 1),
    },
    "hybrid": {
        1: (2, 0.75, 1, 1, 1, 1, 1, (N6 + 1) / 2, 1),
        2: (3, 1, 1, 1, 1, 1, (2 + 1 / 3) / 3, 2.5 / 3, 1),
        3: (1, 1, 1, 1, 1, 1, 1, 1, 1),
        4: (3, 1, 1, 1, 1, 1, 2.25 / 3, (2 + G4) / 3, 1),
        5: (1, 1, 1, 1, 1, 1, 1 / 3, 0.5, 1),
    },
}


def _means(means: MeanScores) -> tuple[float, ...]:
    return (means.n, *(getattr(means, name) for name in HAND))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> LocomoRun:
    import asyncio

    dataset = load_locomo(FIXTURE)
    stages: dict[str, tuple[int, int]] = {}

    def progress(stage: str, done: int, total: int) -> None:
        assert done <= total
        stages[stage] = (done, total)

    result = asyncio.run(
        run_locomo(dataset, Workbench(FakeEmbedder(dim=32), tmp_path_factory.mktemp("locomo"), progress), RunSettings())
    )
    assert stages == {"storing turns": (18, 18), "embedding turns": (7, 7), "questions": (30, 30)}
    return result


def test_every_question_scores_its_hand_computed_figures(run: LocomoRun) -> None:
    assert {(q.sample_id, q.index) for q in run.questions} == set(CATEGORY)
    for question in run.questions:
        key = (question.sample_id, question.index)
        assert question.category == CATEGORY[key]
        for variant, table in EXPECTED.items():
            got = tuple(getattr(question.scores[variant], name) for name in HAND)
            assert got == pytest.approx(table[key]), (variant, key)
            if key in EVIDENCE_RANKS[variant]:
                assert question.evidence_ranks[variant] == EVIDENCE_RANKS[variant][key], (variant, key)


def test_recall_at_one_and_three_count_the_evidence_in_the_first_places(run: LocomoRun) -> None:
    for question in run.questions:
        for variant, scores in question.scores.items():
            ranks = question.evidence_ranks[variant]
            for k, got in ((1, scores.r1), (3, scores.r3)):
                assert got == pytest.approx(sum(1 for r in ranks if r is not None and r <= k) / len(ranks))
    assert run.variants["hybrid"].summary.headline.r1 > 0


def test_means_headline_overall_and_per_category(run: LocomoRun) -> None:
    for variant in ("hybrid", "vector", "fts"):
        summary = run.variants[variant].summary
        assert _means(summary.headline) == pytest.approx(HEADLINE[variant]), variant
        assert _means(summary.overall) == pytest.approx(OVERALL[variant]), variant
        assert set(summary.by_category) == {1, 2, 3, 4, 5}
        for category, expected in BY_CATEGORY[variant].items():
            assert _means(summary.by_category[category]) == pytest.approx(expected), (variant, category)


def test_ingestion_counts_short_turns_and_skipped_questions(run: LocomoRun) -> None:
    assert (run.ingest.turns, run.ingest.embedded, run.ingest.not_embedded) == (18, 7, 11)
    assert run.ingest.turns_per_s > 0
    assert all(result.latency.count == 10 for result in run.variants.values())
    assert (run.embedder_id, run.embedder_dim) == ("fake-hash-32", 32)


def test_json_and_markdown_carry_every_figure_and_the_configuration(run: LocomoRun) -> None:
    embedder = {"backend": "fake", "threads": 1}
    figures = json.loads(json.dumps(to_json(run, machine="test box", started_at="now", embedder_config=embedder)))
    config = figures["configuration"]
    assert config["data"]["name"] == "locomo_tiny.json"
    assert len(config["data"]["sha256"]) == 64
    assert config["embedder"] == {**embedder, "model_id": "fake-hash-32", "dim": 32, "batch_size": 64}
    assert config["indexing"]["min_embed_tokens"] == 10
    assert config["retrieval"]["top_k"] == 50
    assert config["machine"] == "test box"
    assert figures["dataset"]["questions_scored"] == 10
    assert figures["dataset"]["skipped"] == [
        {"sample_id": "tiny-1", "qa_index": 4, "category": 3},
        {"sample_id": "tiny-2", "qa_index": 4, "category": 5},
    ]
    assert figures["dataset"]["unresolved_evidence"] == [
        {"sample_id": "tiny-1", "qa_index": 3, "ids": ["D7:7"]},
        {"sample_id": "tiny-2", "qa_index": 3, "ids": ["D9:9"]},
        {"sample_id": "tiny-2", "qa_index": 4, "ids": ["D"]},
    ]
    assert figures["ingestion"]["not_embedded_below_min_tokens"] == 11
    hybrid = figures["results"]["hybrid"]
    assert hybrid["headline_categories_1_4"]["r5"] == pytest.approx(8.5 / 9)
    assert hybrid["by_category"]["2"]["name"] == "temporal"
    assert hybrid["latency_ms"]["count"] == 10
    assert len(figures["questions"]) == 10
    # Questions are identified, never quoted.
    assert "kettle" not in json.dumps(figures)

    markdown = to_markdown(run)
    assert "| hybrid | 66.7 | 83.3 | 94.4 | 100.0 | 100.0 | 100.0 | 100.0 | 84.3 |" in markdown
    assert "| DRAGON (LoCoMo paper, Table 3) | – | – | 60.4 | 69.6 |" in markdown
    assert "| DRAGON (LoCoMo paper, Table 3) | – | – | 56.7 | 66.2 |" in markdown
    assert "| fts | 4 single-hop | 3 | 66.7 |" in markdown


def test_cli_writes_json_and_markdown(tmp_path: Path) -> None:
    env = {"KLAW__EMBEDDER__BACKEND": "fake", "KLAW__EMBEDDER__DIM": "32"}
    out = tmp_path / "out"
    result = klaw_here(tmp_path / "home", "bench", "locomo", "--data", str(FIXTURE), "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    figures = json.loads((out / "locomo.json").read_text(encoding="utf-8"))
    assert figures["results"]["fts"]["all_categories"]["mrr50"] == pytest.approx(0.825)
    assert figures["configuration"]["embedder"]["model_id"] == "fake-hash-32"
    assert figures["configuration"]["embedder"]["threads"] == 1
    assert "DRAGON" in (out / "locomo.md").read_text(encoding="utf-8")
    assert "hybrid" in result.stdout


def test_cli_names_what_is_wrong_with_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"sample_id": "x", "conversation": {}, "qa": []}]), encoding="utf-8")
    env = {"KLAW__EMBEDDER__BACKEND": "fake"}
    result = klaw_here(
        tmp_path / "home", "bench", "locomo", "--data", str(broken), "--out", str(tmp_path / "o"), env=env
    )
    assert result.returncode == 2
    assert "conversation [0] (x)" in result.stderr
    assert "Traceback" not in result.stderr
    bad_variant = klaw_here(tmp_path / "home", "bench", "locomo", "--data", str(FIXTURE), "--variants", "bm25", env=env)
    assert bad_variant.returncode == 2
    assert "variants" in bad_variant.stderr


async def test_on_postgres_vector_search_scores_every_question_as_on_sqlite(
    run: LocomoRun, tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KLAW_TEST_DATABASE_URL", postgres_server.dsn(new_database(postgres_server)))
    settings = RunSettings(database=DatabaseConfig(backend="postgres", url_env="KLAW_TEST_DATABASE_URL"))

    on_postgres = await run_locomo(load_locomo(FIXTURE), Workbench(FakeEmbedder(dim=32), tmp_path), settings)

    assert (on_postgres.ingest.turns, on_postgres.ingest.embedded) == (18, 7)
    by_key = {(q.sample_id, q.index): q for q in run.questions}
    for question in on_postgres.questions:  # exact KNN on both backends: the same ranks
        assert question.scores["vector"] == by_key[(question.sample_id, question.index)].scores["vector"]
    assert on_postgres.variants["fts"].summary.headline is not None  # full text ranks its own way
    assert not list(tmp_path.glob("*/klaw.db"))  # nothing went to SQLite
