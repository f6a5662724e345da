"""The LoCoMo bench's outputs: a JSON document of every figure and the configuration that produced
it, and a short Markdown table beside the published anchors.

JSON figures are fractions in [0, 1]; the Markdown shows percentages, the unit the LoCoMo paper
uses. Questions are identified by conversation and `qa` position, never quoted: the data is
CC BY-NC and stays where it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from klaw.bench.locomo.metrics import CATEGORY_NAMES, HEADLINE_CATEGORIES, METRIC_NAMES, MeanScores
from klaw.bench.locomo.runner import CHANNEL, LocomoRun
from klaw.distribution import klaw_version

# Published figures, in percent (bench/METRICS.md; LoCoMo paper Table 3, DRAGON, dialog turns;
# R@25/R@50 from bench/data/README.md §3). The FTS5 line is the team's sanity reference
# (data/README.md §4), measured on all ten conversations.
ANCHORS: dict[str, dict[str, dict[str, float]]] = {
    "DRAGON (LoCoMo paper, Table 3)": {
        "headline": {"r5": 60.4, "r10": 69.6, "r25": 79.7, "r50": 85.6},
        "overall": {"r5": 56.7, "r10": 66.2, "r25": 76.7, "r50": 82.7},
    },
    "FTS5-only baseline (10 conversations)": {
        "headline": {"r5": 43.5, "r10": 50.9, "r50": 67.9, "all_hit10": 46.5, "mrr50": 36.4},
        "overall": {"r5": 45.7, "r10": 53.5, "r50": 70.3, "all_hit10": 49.9, "mrr50": 37.3},
    },
}
LABELS = {
    "r1": "R@1",
    "r3": "R@3",
    "r5": "R@5",
    "r10": "R@10",
    "r25": "R@25",
    "r50": "R@50",
    "all_hit10": "AllHit@10",
    "mrr50": "MRR@50",
    "ndcg10": "NDCG@10",
    "session_r5": "SessR@5",
}
MESSAGE_TEXT = '"<speaker>: <text>" + " [shares <blip_caption>]" when the turn has a caption'
EVIDENCE_RULE = (
    "bench/data/README.md §1: strip '(' and ')', split on ';' ',' and whitespace, 'D:11:26' → 'D11:26',"
    " drop leading zeros of the turn number, keep ids that exist, each once; questions left with none are skipped"
)


_STORES = {
    "sqlite": "one fresh SQLite store (klaw.db + JSONL log) per conversation",
    "postgres": "one fresh PostgreSQL schema (klaw_bench_<pid>, its log in log_records) per conversation",
}


def to_json(run: LocomoRun, *, machine: str, started_at: str, embedder_config: Mapping[str, Any]) -> dict[str, Any]:
    """Every figure; `embedder_config` is the `embedder` section in use (backend, threads, …)."""
    dataset = run.dataset
    skipped = [(c.sample_id, s) for c in dataset.conversations for s in c.skipped]
    return {
        "bench": "locomo",
        "configuration": {
            "data": asdict(dataset.source),
            "embedder": {
                **embedder_config,
                "model_id": run.embedder_id,
                "dim": run.embedder_dim,
                "batch_size": run.settings.batch_size,
            },
            "indexing": {
                "backend": run.settings.database.backend,
                "store": _STORES[run.settings.database.backend],
                "path": "Ingestion.accept (log → messages + FTS5 + embedding job) then EmbeddingQueue.run_until_idle",
                "chat": f"{CHANNEL}:<sample_id>, role user, all sessions in one segment",
                "message_text": MESSAGE_TEXT,
                "created_at": "the session's date_time (read as UTC), turns one second apart",
                "embedding_rule": "klaw.memory.embedding_policy.should_embed (product default, unchanged)",
                "min_embed_tokens": run.settings.min_embed_tokens,
            },
            "retrieval": {
                "variants": list(run.settings.variants),
                "top_k": run.settings.top_k,
                "hybrid": f"HybridSearch.search, {run.settings.top_k} candidates a side, min-max score fusion,"
                " scores shared with neighbouring messages",
                "search": run.settings.search.model_dump(mode="json", by_alias=True),
                "vector": "embedder + store.search.nearest, closest first",
                "fts": "store.search.full_text alone (FTS5 bm25 over the message and, at 0.2, the message before"
                " it; stop words dropped, words OR-ed)",
                "scope": "the conversation's segment, no exclusions",
            },
            "evidence_normalisation": EVIDENCE_RULE,
            "machine": machine,
            "klaw_version": klaw_version(),
            "started_at": started_at,
        },
        "dataset": {
            "conversations": [c.sample_id for c in dataset.conversations],
            "sessions": sum(len(c.sessions) for c in dataset.conversations),
            "turns": dataset.turn_count,
            "questions_scored": dataset.question_count,
            "questions_skipped": len(skipped),
            "skipped": [{"sample_id": sid, "qa_index": s.index, "category": s.category} for sid, s in skipped],
            "scored_by_category": _count_by_category(run),
            "unresolved_evidence": [
                {"sample_id": c.sample_id, "qa_index": index, "ids": list(ids)}
                for c in dataset.conversations
                for index, ids in sorted(
                    [(q.index, q.unresolved) for q in c.questions] + [(s.index, s.unresolved) for s in c.skipped]
                )
                if ids
            ],
        },
        "ingestion": {
            "turns": run.ingest.turns,
            "embedded": run.ingest.embedded,
            "not_embedded_below_min_tokens": run.ingest.not_embedded,
            "store_seconds": run.ingest.store_seconds,
            "embed_seconds": run.ingest.embed_seconds,
            "turns_per_s": run.ingest.turns_per_s,
        },
        "results": {
            variant: {
                "headline_categories_1_4": result.summary.headline.as_dict(),
                "all_categories": result.summary.overall.as_dict(),
                "by_category": {
                    str(category): {"name": CATEGORY_NAMES.get(category, "unknown"), **means.as_dict()}
                    for category, means in result.summary.by_category.items()
                },
                "latency_ms": {
                    "p50": result.latency.p50_ms,
                    "p95": result.latency.p95_ms,
                    "count": result.latency.count,
                },
            }
            for variant, result in run.variants.items()
        },
        "anchors_percent": ANCHORS,
        "questions": [
            {
                "sample_id": q.sample_id,
                "qa_index": q.index,
                "category": q.category,
                "evidence": list(q.evidence),
                "scores": {v: asdict(s) for v, s in q.scores.items()},
                "evidence_ranks": {v: list(r) for v, r in q.evidence_ranks.items()},
            }
            for q in run.questions
        ],
        "seconds": run.seconds,
    }


def _count_by_category(run: LocomoRun) -> dict[str, int]:
    counts = Counter(q.category for c in run.dataset.conversations for q in c.questions)
    return {str(category): counts[category] for category in sorted(counts)}


def to_markdown(run: LocomoRun) -> str:
    dataset = run.dataset
    ingest = run.ingest
    skipped = sum(len(c.skipped) for c in dataset.conversations)
    first = next(iter(run.variants.values()))
    lines = [
        f"# LoCoMo retrieval: {dataset.source.name} (sha256 {dataset.source.sha256[:12]}…)",
        "",
        f"Embedder `{run.embedder_id}` (dim {run.embedder_dim}), on {run.settings.database.backend};"
        f" {len(dataset.conversations)} conversations,"
        f" {dataset.turn_count} turns ({ingest.embedded} embedded, {ingest.not_embedded} below"
        f" autoRag.minMessageTokens = {run.settings.min_embed_tokens}: full text only);"
        f" {dataset.question_count} questions scored, {skipped} skipped (no valid evidence). Figures in %.",
        "",
        f"## Headline: categories {', '.join(map(str, HEADLINE_CATEGORIES))} (n = {first.summary.headline.n})",
        "",
        *_table(run, "headline"),
        "",
        f"## All categories (n = {first.summary.overall.n})",
        "",
        *_table(run, "overall"),
        "",
        "## Per category",
        "",
        "| variant | category | n | " + " | ".join(LABELS[m] for m in METRIC_NAMES) + " |",
        "|---|---|---|" + "---|" * len(METRIC_NAMES),
    ]
    for variant, result in run.variants.items():
        for category, means in result.summary.by_category.items():
            name = f"{category} {CATEGORY_NAMES.get(category, '')}".strip()
            lines.append(_row(variant, name, str(means.n), *(_pct(means, m) for m in METRIC_NAMES)))
    lines += [
        "",
        "## Timings",
        "",
        "| variant | query p50 (ms) | query p95 (ms) |",
        "|---|---|---|",
        *(f"| {v} | {r.latency.p50_ms:.1f} | {r.latency.p95_ms:.1f} |" for v, r in run.variants.items()),
        "",
        f"Ingestion: {ingest.turns} turns in {ingest.store_seconds + ingest.embed_seconds:.1f} s ="
        f" {ingest.turns_per_s:.0f} turns/s (storing {ingest.store_seconds:.1f} s, embedding"
        f" {ingest.embed_seconds:.1f} s). Whole run {run.seconds:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def _table(run: LocomoRun, which: str) -> list[str]:
    lines = [
        "| variant | " + " | ".join(LABELS[m] for m in METRIC_NAMES) + " |",
        "|---|" + "---|" * len(METRIC_NAMES),
    ]
    for variant, result in run.variants.items():
        means = result.summary.headline if which == "headline" else result.summary.overall
        lines.append(_row(variant, *(_pct(means, m) for m in METRIC_NAMES)))
    for name, anchor in ANCHORS.items():
        figures = anchor[which]
        lines.append(_row(name, *(f"{figures[m]:.1f}" if m in figures else "–" for m in METRIC_NAMES)))
    return lines


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _pct(means: MeanScores, metric: str) -> str:
    return f"{100 * float(getattr(means, metric)):.1f}"
