"""The past-sessions bench's outputs: `past_sessions.json` (every figure and the configuration that
produced it) and `past_sessions.md` (the tables a person reads to set `rag.minSimilarity`).

JSON figures are fractions and cosine similarities; the Markdown shows shares in percent and
similarities with two decimals. Nothing of the data is quoted (it is CC BY-NC and stays where it is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from klaw.bench.locomo.past_sessions import CHITCHAT, HEADLINE_CATEGORIES, Asked, PastRun
from klaw.bench.locomo.past_sessions_chat import CHANNEL, NEUTRAL_NAMES
from klaw.bench.locomo.past_sessions_figures import (
    KINDS,
    THRESHOLDS,
    LevelFigures,
    ShownFigures,
    Spread,
    exchange_figures,
    segment_figures,
    shown_figures,
)
from klaw.bench.locomo.report import EVIDENCE_RULE
from klaw.distribution import klaw_version

KIND_LABELS = {
    "question": f"questions (categories {', '.join(map(str, HEADLINE_CATEGORIES))})",
    "adversarial": "adversarial questions (category 5)",
    "other_conversation": "another conversation's questions",
    "chitchat": "chit-chat",
}
EXCHANGE_TEXT_LABELS = {
    "turns": "a turn and the reply after it, verbatim",
    "facts": "LoCoMo's observation sentences about those two turns (none: no summary)",
}
NAMES_LABELS = {
    "kept": "speakers' names as in the data",
    "neutral": f"speakers' names replaced by {NEUTRAL_NAMES[0]!r} and {NEUTRAL_NAMES[1]!r}",
}


def figures(run: PastRun) -> dict[str, dict[str, Any]]:
    """By way of naming: segment figures, exchange figures by exchange text, what the settings show."""
    rag = run.settings.rag
    result: dict[str, dict[str, Any]] = {}
    for names in run.settings.names:
        by_text = {text: run.asked[names, text] for text in run.settings.exchange_texts}
        first = next(iter(by_text.values()))
        result[names] = {
            "segments": {kind: segment_figures(first, kind, rag) for kind in KINDS},
            "exchanges": {
                text: {kind: exchange_figures(asked, kind, rag) for kind in KINDS} for text, asked in by_text.items()
            },
            "in_force": {text: {kind: shown_figures(asked, kind) for kind in KINDS} for text, asked in by_text.items()},
        }
    return result


def to_json(run: PastRun, *, machine: str, started_at: str, embedder_config: Mapping[str, Any]) -> dict[str, Any]:
    dataset = run.dataset
    first = run.asked[run.settings.setups[0]]
    return {
        "bench": "past-sessions",
        "configuration": {
            "data": asdict(dataset.source),
            "embedder": {**embedder_config, "model_id": run.embedder_id, "dim": run.embedder_dim},
            "rag_in_force": run.settings.rag.model_dump(mode="json", by_alias=True),
            "chat": {
                "store": "one fresh SqliteStore per conversation, way of naming and exchange text",
                "chat": f"{CHANNEL}:<sample_id>; every session with a session_summary is a past segment closed by"
                " a /new record, its final segment summary the session_summary",
                "exchanges": "the session's turns paired in order (a turn and the reply after it)",
                "exchange_texts": {t: EXCHANGE_TEXT_LABELS[t] for t in run.settings.exchange_texts},
                "names": {n: NAMES_LABELS[n] for n in run.settings.names},
                "embedding": "summaries repository (job in the same transaction) then EmbeddingQueue.run_until_idle",
            },
            "retrieval": "PastConversationRetriever, default stages without the block, gate below any cosine and"
            " every past segment asked for, from a new segment; the evidence sessions' exchanges ranked in full by"
            " SimilarExchanges; what a gate shows derived from those rankings; 'in_force': the retriever with the"
            " rag settings in force, block included",
            "queries": {
                "question": "QA categories 1-4, evidence sessions and exchanges from the evidence turns",
                "adversarial": "QA category 5",
                "other_conversation": "the next conversation's category 1-4 questions (the last asks the first's)",
                "chitchat": list(CHITCHAT),
            },
            "thresholds": list(THRESHOLDS),
            "evidence_normalisation": EVIDENCE_RULE,
            "machine": machine,
            "klaw_version": klaw_version(),
            "started_at": started_at,
        },
        "counts": {
            "conversations": [c.sample_id for c in dataset.conversations],
            "past_segments": run.segments,
            "exchange_summaries": run.exchange_summaries,
            "queries": asked_counts(first),
        },
        "figures": {
            names: {
                "segments": {kind: _level(f) for kind, f in by["segments"].items()},
                "exchanges": {
                    text: {kind: _level(f) for kind, f in kinds.items()} for text, kinds in by["exchanges"].items()
                },
                "in_force": {
                    text: {kind: asdict(f) for kind, f in kinds.items()} for text, kinds in by["in_force"].items()
                },
            }
            for names, by in figures(run).items()
        },
        "seconds": run.seconds,
    }


def to_markdown(run: PastRun) -> str:
    dataset = run.dataset
    rag = run.settings.rag
    first = run.asked[run.settings.setups[0]]
    counts = asked_counts(first)
    lines = [
        f"# Past sessions: {dataset.source.name} (sha256 {dataset.source.sha256[:12]}…)",
        "",
        f"Embedder `{run.embedder_id}` (dim {run.embedder_dim}); {len(dataset.conversations)} conversations,"
        f" {run.segments} past segments (session summaries), exchange summaries: "
        + ", ".join(f"{n} {text}" for text, n in run.exchange_summaries.items())
        + "; queries: "
        + ", ".join(f"{counts[kind]} {KIND_LABELS[kind]}" for kind in KINDS)
        + f". Limits in force: {rag.conversation_limit} segments, {rag.exchange_limit_per_conversation} exchanges"
        f" each; block {rag.max_tokens} tokens. Whole run {run.seconds:.0f} s.",
        "",
        "Similarities are cosine. *passes*: the evidence's similarity reaches the gate; *found*: the stages at"
        " that gate and the limits find an evidence segment (exchange); *anything*: they find something.",
    ]
    for names, by in figures(run).items():
        lines += ["", f"## {NAMES_LABELS[names].capitalize()}", "", "### Segments (session summaries)", ""]
        lines += _spreads(by["segments"], "evidence session", "other sessions")
        lines += ["", *_ranks(by["segments"], "segments"), "", *_gate(by["segments"], "segments")]
        for text, kinds in by["exchanges"].items():
            missing = kinds["question"].missing
            lines += ["", f"### Exchanges: {EXCHANGE_TEXT_LABELS[text]}", ""]
            if missing:
                lines += [f"{missing} questions have no exchange summary holding evidence: left out.", ""]
            lines += _spreads(kinds, "evidence exchange", "other exchanges of its session")
            lines += ["", *_ranks(kinds, "exchanges of its session"), "", *_gate(kinds, "exchanges")]
        lines += ["", f"### As configured (minSimilarity {rag.min_similarity}), block included", ""]
        lines += _shown(by["in_force"])
    lines.append("")
    return "\n".join(lines)


def asked_counts(asked: Sequence[Asked]) -> dict[str, int]:
    return {kind: sum(1 for a in asked if a.kind == kind) for kind in KINDS}


def _level(f: LevelFigures) -> dict[str, Any]:
    data = asdict(f)
    data["hit_at"] = {str(k): v for k, v in f.hit_at.items()}
    data["recall_at"] = {str(k): v for k, v in f.recall_at.items()}
    return data


def _spreads(kinds: Mapping[str, LevelFigures], evidence: str, others: str) -> list[str]:
    question = kinds["question"]
    rows = [
        (f"{evidence}, {KIND_LABELS['question']}", question.evidence),
        (f"{others}, {KIND_LABELS['question']}", question.others),
        *((f"most similar, {KIND_LABELS[kind]}", kinds[kind].top) for kind in KINDS),
    ]
    return [
        "| similarity of | n | p10 | p25 | p50 | p75 | p90 |",
        "|---|---|---|---|---|---|---|",
        *(_spread_row(label, spread) for label, spread in rows),
    ]


def _spread_row(label: str, spread: Spread | None) -> str:
    if spread is None:
        return f"| {label} | 0 | – | – | – | – | – |"
    values = (spread.p10, spread.p25, spread.p50, spread.p75, spread.p90)
    return f"| {label} | {spread.count} | " + " | ".join(f"{v:.2f}" for v in values) + " |"


def _ranks(kinds: Mapping[str, LevelFigures], among: str) -> list[str]:
    ks = list(kinds["question"].hit_at)
    lines = [
        f"| evidence among the k most similar {among} | n | " + " | ".join(f"hit@{k}" for k in ks) + " |",
        "|---|---|" + "---|" * len(ks),
    ]
    for kind in ("question", "adversarial"):
        f = kinds[kind]
        lines.append(f"| {KIND_LABELS[kind]} | {f.count} | " + " | ".join(_pct(f.hit_at.get(k)) for k in ks) + " |")
    return lines


def _gate(kinds: Mapping[str, LevelFigures], unit: str) -> list[str]:
    lines = [
        f"| gate | questions: passes | found | {unit} per question | adversarial: found | anything:"
        " other conversation | anything: chit-chat |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = {kind: kinds[kind].gate for kind in KINDS}
    for position, threshold in enumerate(THRESHOLDS):
        question, adversarial = rows["question"][position], rows["adversarial"][position]
        other, chitchat = rows["other_conversation"][position], rows["chitchat"][position]
        lines.append(
            f"| {threshold:.2f} | {_pct(question.evidence_passes)} | {_pct(question.evidence_found)}"
            f" | {question.found_per_query:.2f} | {_pct(adversarial.evidence_found)}"
            f" | {_pct(other.any_found)} | {_pct(chitchat.any_found)} |"
        )
    return lines


def _shown(by_text: Mapping[str, Mapping[str, ShownFigures]]) -> list[str]:
    lines = [
        "| exchange text | queries | n | evidence segment shown | evidence exchange shown | anything shown"
        " | segments | exchanges | block tokens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for text, kinds in by_text.items():
        for kind in KINDS:
            f = kinds[kind]
            lines.append(
                f"| {text} | {KIND_LABELS[kind]} | {f.count} | {_pct(f.evidence_segment)} | {_pct(f.evidence_exchange)}"
                f" | {_pct(f.any_shown)} | {f.segments_per_query:.2f} | {f.exchanges_per_query:.2f}"
                f" | {f.block_tokens:.0f} |"
            )
    return lines


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"
