"""The past-sessions bench on `tests/fixtures/past_sessions_tiny.json` (invented), with the 32-dim fake embedder.

How the fixture makes figures provable: a question whose words are exactly a summary's (or an exchange
text's) has cosine 1 with it, so it ranks first. tiny-a has three sessions, the third without a
summary (never a past segment: questions about it are never found); its session 2 ends with a turn
without a reply (an exchange of one turn, without facts). tiny-b's last exchange has no facts either.

- tiny-a #0: the words of session 1's summary (evidence D1:3, session 1);
- tiny-a #1: the words of session 2's first exchange as `turns` (evidence in sessions 2 and 3);
- tiny-a #2: the words of session 2's first exchange as `facts`;
- tiny-a #3 (category 5): the words of session 2's summary, evidence in session 1 (ranked second);
- tiny-a #4: evidence only in session 3; #5 has no evidence (skipped by the loader);
- tiny-b #0, #1: the words of sessions 2 and 1's summaries; #2: evidence in an exchange without facts.

Other rankings (cosines between unrelated texts are hash noise) are checked against the fake
embedder's vectors compared directly, outside the store and the pipeline.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from klaw.bench.locomo.annotations import SessionNotes, load_session_notes
from klaw.bench.locomo.dataset import LocomoDataset, load_locomo
from klaw.bench.locomo.past_sessions import CHITCHAT, Asked, PastRun, PastRunSettings, run_past_sessions
from klaw.bench.locomo.past_sessions_chat import renamer
from klaw.bench.locomo.past_sessions_figures import exchange_figures, found_exchanges, found_segments, segment_figures
from klaw.bench.locomo.past_sessions_report import to_json, to_markdown
from klaw.bench.locomo.workbench import Workbench
from klaw.config import RagConfig
from klaw.memory.embedder.fake import FakeEmbedder
from tests.cli.klaw_here import klaw_here

FIXTURE = Path(__file__).parent.parent / "fixtures" / "past_sessions_tiny.json"
DIM = 32


def load() -> tuple[LocomoDataset, dict[str, SessionNotes]]:
    dataset = load_locomo(FIXTURE)
    return dataset, load_session_notes(FIXTURE, dataset)


def measure(work_dir: Path, settings: PastRunSettings, progress: dict[str, tuple[int, int]] | None = None) -> PastRun:
    dataset, notes = load()

    def report(stage: str, done: int, total: int) -> None:
        assert done <= total
        if progress is not None:
            progress[stage] = (done, total)

    return asyncio.run(run_past_sessions(dataset, notes, Workbench(FakeEmbedder(DIM), work_dir, report), settings))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> PastRun:
    stages: dict[str, tuple[int, int]] = {}
    result = measure(tmp_path_factory.mktemp("past"), PastRunSettings(), stages)
    # Per way of naming: summaries tiny-a 2 + 4 turns / 2 + 3 facts, tiny-b 2 + 3 / 2 + 2 = 20; queries: tiny-a
    # 4 + 1 + 3 (tiny-b's) + 24 chit-chat, tiny-b 3 + 0 + 4 + 24 = 63, per exchange text.
    assert stages == {"storing summaries": (40, 40), "embedding summaries": (40, 40), "queries": (252, 252)}
    return result


def asked(run: PastRun, names: str, text: str, sample_id: str, kind: str, index: int) -> Asked:
    found = [a for a in run.asked[names, text] if (a.sample_id, a.kind, a.index) == (sample_id, kind, index)]
    assert len(found) == 1
    return found[0]


def first(a: Asked) -> tuple[int, float]:
    """The most similar past session and its similarity (to 5 decimals: float32 vectors)."""
    session, similarity = a.segments[0]
    return session, round(similarity, 5)


def evidence_exchange(a: Asked) -> tuple[int, float, int] | None:
    found = a.evidence_exchange
    return None if found is None else (found.session, round(found.similarity, 5), found.rank)


def test_counts(run: PastRun) -> None:
    assert (run.segments, run.exchange_summaries) == (4, {"turns": 7, "facts": 5})
    assert (run.embedder_id, run.embedder_dim) == ("fake-hash-32", 32)
    kinds = [a.kind for a in run.asked["kept", "turns"]]
    assert [kinds.count(k) for k in ("question", "adversarial", "other_conversation", "chitchat")] == [7, 1, 7, 48]


@pytest.mark.parametrize("names", ["kept", "neutral"])
def test_verbatim_questions_find_their_summary_first(run: PastRun, names: str) -> None:
    a0 = asked(run, names, "turns", "tiny-a", "question", 0)
    assert a0.evidence_sessions == {1} and first(a0) == (1, 1.0)
    a1 = asked(run, names, "turns", "tiny-a", "question", 1)
    assert a1.evidence_sessions == {2, 3} and 3 not in {n for n, _ in a1.segments}
    assert evidence_exchange(a1) == (2, 1.0, 1)
    assert evidence_exchange(asked(run, names, "facts", "tiny-a", "question", 2)) == (2, 1.0, 1)
    adversarial = asked(run, names, "turns", "tiny-a", "adversarial", 3)
    assert adversarial.evidence_sessions == {1} and first(adversarial) == (2, 1.0)
    assert first(asked(run, names, "turns", "tiny-b", "question", 0)) == (2, 1.0)
    assert first(asked(run, names, "turns", "tiny-b", "question", 1)) == (1, 1.0)
    never = asked(run, names, "turns", "tiny-a", "question", 4)
    assert never.evidence_sessions == {3} and never.evidence_exchange is None
    assert asked(run, names, "facts", "tiny-b", "question", 2).evidence_exchange is None  # no facts
    assert asked(run, names, "turns", "tiny-b", "question", 2).evidence_exchange is not None


@pytest.mark.parametrize("names", ["kept", "neutral"])
def test_every_segment_ranking_is_the_embedders_cosines(run: PastRun, names: str) -> None:
    expected = asyncio.run(direct_cosines(names))
    for text in ("turns", "facts"):
        got = run.asked[names, text]
        assert len(got) == len(expected)
        for a in got:
            where = (names, text, a.sample_id, a.kind, a.index)
            assert dict(a.segments) == pytest.approx(dict(expected[a.sample_id, a.kind, a.index]), abs=1e-5), where
            similarities = [s for _, s in a.segments]  # most similar first (ties, e.g. two at 0, in any order)
            assert similarities == sorted(similarities, reverse=True), where


async def direct_cosines(names: str) -> dict[tuple[str, str, int], list[tuple[int, float]]]:
    """Each query's past sessions ranked by cosine of the fake embedder's vectors, computed here."""
    dataset, notes = load()
    embedder = FakeEmbedder(DIM)
    conversations = dataset.conversations
    found: dict[tuple[str, str, int], list[tuple[int, float]]] = {}
    for position, conversation in enumerate(conversations):
        rename = renamer(conversation, names)
        summaries = notes[conversation.sample_id].summaries
        sessions = sorted(summaries)
        vectors = await embedder.embed([rename(summaries[n]) for n in sessions])
        following = conversations[(position + 1) % len(conversations)]
        queries = [
            ("question" if q.category < 5 else "adversarial", q.index, rename(q.text)) for q in conversation.questions
        ]
        queries += [
            ("other_conversation", q.index, renamer(following, names)(q.text))
            for q in following.questions
            if q.category < 5
        ]
        queries += [("chitchat", index, text) for index, text in enumerate(CHITCHAT)]
        for kind, index, text in queries:
            cosines = vectors @ (await embedder.embed([text]))[0]
            found[conversation.sample_id, kind, index] = sorted(
                zip(sessions, map(float, cosines), strict=True), key=lambda p: -p[1]
            )
    return found


def test_segments_are_the_same_whatever_the_exchange_text(run: PastRun) -> None:
    for names in ("kept", "neutral"):
        turns, facts = run.asked[names, "turns"], run.asked[names, "facts"]
        assert [(a.kind, a.index, dict(a.segments)) for a in turns] == [
            (a.kind, a.index, dict(a.segments)) for a in facts
        ]


def test_figures_by_hand(run: PastRun) -> None:
    rag = RagConfig()
    questions = segment_figures(run.asked["kept", "turns"], "question", rag)
    # Every question's evidence session is among the two past segments of its chat, except tiny-a #4's.
    assert (questions.count, questions.hit_at[3], questions.hit_at[5]) == (7, 6 / 7, 6 / 7)
    assert questions.recall_at[3] == pytest.approx(5.5 / 7)  # tiny-a #1: one of its two sessions
    # Ranked first and above 0.7: the three verbatim summaries (1.0), tiny-a #1 and #2 (most words of session 2's
    # summary: 0.82, 0.86). Not: tiny-a #4 (never ranked) and tiny-b #2, which shares only "Di" (0.12, below 0.2).
    assert questions.hit_at[1] == 5 / 7
    assert [questions.gate[i].evidence_passes for i in (0, -1)] == [5 / 7, 5 / 7]
    adversarial = segment_figures(run.asked["kept", "turns"], "adversarial", rag)
    assert (adversarial.count, adversarial.hit_at[1], adversarial.hit_at[3]) == (1, 0.0, 1.0)
    turns = exchange_figures(run.asked["kept", "turns"], "question", rag)
    facts = exchange_figures(run.asked["kept", "facts"], "question", rag)
    assert (turns.count, turns.missing, facts.count, facts.missing) == (6, 1, 5, 2)


@pytest.mark.parametrize(("gate", "segments", "exchanges"), [(0.0, 3, 2), (0.3, 1, 1), (0.45, 2, 1), (0.95, 3, 2)])
def test_what_a_gate_shows_is_what_the_pipeline_shows(
    tmp_path: Path, gate: float, segments: int, exchanges: int
) -> None:
    """The derivation from the open rankings against the retriever run at the gate (block budget out of the way)."""
    rag = RagConfig(
        min_similarity=gate, conversation_limit=segments, exchange_limit_per_conversation=exchanges, max_tokens=100_000
    )
    result = measure(tmp_path, PastRunSettings(rag=rag))
    shown = 0
    for setup, every in result.asked.items():
        for a in every:
            assert a.shown_sessions == tuple(n for n, _ in found_segments(a, gate, rag)), (setup, a.kind, a.index)
            assert a.shown_exchanges == tuple(e for e, _ in found_exchanges(a, gate, rag)), (setup, a.kind, a.index)
            shown += len(a.shown_sessions)
    assert shown > 0
    if gate > 0:
        assert any(not a.shown_sessions for every in result.asked.values() for a in every)


def test_json_and_markdown(run: PastRun) -> None:
    embedder = {"backend": "fake", "threads": 1}
    figures = json.loads(json.dumps(to_json(run, machine="test box", started_at="now", embedder_config=embedder)))
    config = figures["configuration"]
    assert config["data"]["name"] == "past_sessions_tiny.json"
    assert config["embedder"] == {**embedder, "model_id": "fake-hash-32", "dim": 32}
    assert config["rag_in_force"]["minSimilarity"] == RagConfig().min_similarity
    assert figures["counts"]["queries"] == {"question": 7, "adversarial": 1, "other_conversation": 7, "chitchat": 48}
    segments = figures["figures"]["kept"]["segments"]["question"]
    assert segments["hit_at"]["3"] == pytest.approx(6 / 7)
    assert len(segments["gate"]) == 11
    assert figures["figures"]["neutral"]["exchanges"]["facts"]["question"]["missing"] == 2
    assert set(figures["figures"]["kept"]["in_force"]["turns"]) == {
        "question",
        "adversarial",
        "other_conversation",
        "chitchat",
    }
    assert "sourdough" not in json.dumps(figures)  # the data is named, never quoted

    markdown = to_markdown(run)
    assert "## Speakers' names replaced by 'the person' and 'the assistant'" in markdown
    assert "| questions (categories 1, 2, 3, 4) | 7 |" in markdown
    assert "85.7 | 85.7 |" in markdown  # segment hit@3 and hit@5
    assert "1 questions have no exchange summary holding evidence" in markdown


def test_cli_writes_json_and_markdown(tmp_path: Path) -> None:
    env = {"KLAW__EMBEDDER__BACKEND": "fake", "KLAW__EMBEDDER__DIM": "32", "KLAW__RAG__MINSIMILARITY": "0.5"}
    out = tmp_path / "out"
    command = ["bench", "past-sessions", "--data", str(FIXTURE), "--out", str(out)]
    result = klaw_here(tmp_path / "home", *command, "--names", "kept", env=env)
    assert result.returncode == 0, result.stderr
    figures = json.loads((out / "past_sessions.json").read_text(encoding="utf-8"))
    assert figures["configuration"]["rag_in_force"]["minSimilarity"] == 0.5
    assert list(figures["figures"]) == ["kept"]
    assert figures["counts"]["exchange_summaries"] == {"turns": 7, "facts": 5}
    assert "Exchanges: a turn and the reply after it" in (out / "past_sessions.md").read_text(encoding="utf-8")
    bad = klaw_here(tmp_path / "home", *command, "--names", "nicknames", env=env)
    assert bad.returncode == 2 and "names must be a non-empty subset of kept, neutral" in bad.stderr
