"""`recall.json` and `recall.md`: what `klaw bench recall` measured, per layer and per category."""

from __future__ import annotations

from typing import Any

from klaw.bench.locomo.recall_bench import Asked, RecallRun, summarised

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LAYER_TITLES = {
    "auto_rag": "Auto-RAG (one segment; the last slidingWindow messages are the window)",
    "past": "Past conversations (each session a segment; asked in a new one)",
}


def groups(asked: list[Asked], layer: str) -> dict[str, dict[str, object]]:
    """Row label → figures: each category, categories 1–4, and each kind of negative."""
    mine = [a for a in asked if a.layer == layer]
    rows: dict[str, dict[str, object]] = {}
    for category, name in CATEGORY_NAMES.items():
        chosen = [a for a in mine if a.kind == "question" and a.category == category]
        if chosen:
            rows[f"{category} {name}"] = summarised(chosen)
    rows["categories 1–4"] = summarised([a for a in mine if a.kind == "question" and a.category in (1, 2, 3, 4)])
    for kind in ("chit-chat", "other conversation"):
        chosen = [a for a in mine if a.kind == kind]
        if chosen:
            rows[kind] = summarised(chosen)
    return rows


def to_json(run: RecallRun, **extra: Any) -> dict[str, Any]:
    settings = run.settings
    return {
        **extra,
        "data": {"file": run.dataset.source.name, "conversations": [c.sample_id for c in run.dataset.conversations]},
        "embedder": run.embedder_id,
        "settings": {
            "autoRag": settings.auto_rag.model_dump(mode="json", by_alias=True),
            "search": settings.search.model_dump(mode="json", by_alias=True),
            "rag": settings.rag.model_dump(mode="json", by_alias=True),
            "slidingWindow": settings.sliding_window,
        },
        "layers": {layer: groups(run.asked, layer) for layer in settings.layers},
    }


def to_markdown(run: RecallRun) -> str:
    lines = [
        f"# klaw bench recall — {run.dataset.source.name}, {len(run.dataset.conversations)} conversation(s),"
        f" embedder {run.embedder_id}",
        "",
        "Context recall: mean share of a question's evidence turns in the context (block or window)."
        " Block recall: in the block. Any: share of questions with some evidence in the context."
        " Session: share of evidence turns whose session the block draws on. Injected: share of messages"
        " that got a block (for negatives: false injection).",
    ]
    for layer in run.settings.layers:
        lines += [
            "",
            f"## {LAYER_TITLES[layer]}",
            "",
            "| asked | n | context recall | block recall | any | session | injected | block tokens |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for label, row in groups(run.asked, layer).items():
            if "chit" in label or "other" in label:
                lines.append(f"| {label} | {row['negatives']} | | | | | {row['false_injection']:.1f} | |")
                continue
            lines.append(
                f"| {label} | {row['questions']} | {row['context_recall']:.1f} | {row['block_recall']:.1f} |"
                f" {row['any_evidence_in_context']:.1f} | {row['session_named']:.1f} | {row['injected']:.1f} |"
                f" {row['block_tokens']:.0f} |"
            )
    return "\n".join(lines) + "\n"
