"""`klaw bench scale` end to end on a small chat: every figure is measured over the asked queries and
the production path recalls messages (the window excluded), past conversations included."""

from __future__ import annotations

from pathlib import Path

from klaw.bench.scale_bench import measure_scale
from klaw.memory.embedder.fake import FakeEmbedder


async def test_scale_bench_measures_every_layer(tmp_path: Path) -> None:
    stages: set[str] = set()
    result = await measure_scale(
        tmp_path / "bench.db",
        FakeEmbedder(dim=32),
        messages=400,
        queries=4,
        past_segments=6,
        progress=lambda stage, done, total: stages.add(stage),
    )
    assert stages == {"build", "search"}
    assert (result.messages, result.dim, result.past_segments, result.search_threads) == (400, 32, 6, 2)
    latencies = [
        result.search_with_embedding,
        result.search_without_embedding,
        result.query_embedding,
        result.numpy_floor,
        result.numpy_floor_threaded,
        result.past_conversations,
        result.all_layers,
    ]
    assert all(latency is not None and latency.count == 4 and latency.p50_ms > 0 for latency in latencies)
    assert result.recalled_per_query > 0
    assert result.past_shown_per_query > 0
    assert result.all_layers is not None and result.past_conversations is not None
    assert result.all_layers.p50_ms >= result.past_conversations.p50_ms
    # Exactness and the physical floor are reported: int8 search with the exact rescore finds what
    # exact float search finds, and the bytes it scans are set against a measured bandwidth.
    assert result.recall_at_20 == 1.0
    assert result.scanned_bytes_per_query > 0
    assert result.bandwidth is not None and result.bandwidth.threaded_gb_s > 0
    assert result.bandwidth_floor_ms > 0 and result.vector_bytes > 0
    assert result.reload_first_search_ms is not None and result.reload_first_search_ms > 0
    # Where the search without the query embedding waits: each side timed in the production path.
    split = result.split
    assert split is not None
    parts = [split.vector_side, split.full_text_side, split.neighbours, split.rest]
    assert all(part.count == 4 for part in parts)
    assert split.vector_side.p50_ms > 0 and split.full_text_side.p50_ms > 0 and split.neighbours.p50_ms > 0
    assert split.long_pole() in {"vector", "full text"}
    # ... and its CPU over every thread, which a loaded machine moves less than the wall time.
    assert result.search_cpu is not None and result.search_cpu.count == 4 and result.search_cpu.p50_ms > 0
    # The full-text index is merged after the fill, as the engine merges it (decision 251), and its
    # segments before and after are reported.
    assert result.full_text_segments is not None
    after_fill, after_merge = result.full_text_segments
    assert after_fill >= after_merge >= 1


async def test_a_share_of_the_messages_goes_to_the_past_segments(tmp_path: Path) -> None:
    """`--past-share`: a chat whose past holds most of its messages, which the messages stage searches."""
    result = await measure_scale(
        tmp_path / "bench.db", FakeEmbedder(dim=32), messages=120, queries=2, past_segments=2, past_share=0.75
    )
    assert (result.messages, result.past_messages, result.past_segments) == (120, 90, 2)
    assert result.past_conversations is not None and result.past_conversations.count == 2
    assert result.recall_at_20 == 1.0  # exact search over the current segment's 30 vectors
