"""`klaw bench load` runs end to end: a real engine subprocess behind a real socket.

Not a speed test (figures come from running the bench); it checks the bench measures what it says:
every acknowledged message is counted as stored and as answered, and the engine's memory is read. The
kill-restart variant is not run here: a reply written by the engine just before a SIGKILL can be lost
in transit (outbound frames are not acknowledged by gateways), which the bench reports but a test
could not make deterministic.
"""

from __future__ import annotations

from pathlib import Path

from klaw.bench.load_bench import measure_load
from tests.engine import short_socket_dir


async def test_the_load_bench_counts_every_acknowledged_message() -> None:
    with short_socket_dir() as directory:
        result = await measure_load(Path(directory) / "home", chats=3, seconds=2.0)
    assert not result.killed and result.turns > 0
    assert result.acknowledged == result.stored == result.answered, result.unanswered_ids
    assert result.latency.count == result.turns
    # the engine's memory, read from /proc once its work was done
    assert result.rss_mb is not None and result.peak_rss_mb is not None
    assert 0 < result.rss_mb <= result.peak_rss_mb
    assert result.own_mb is not None and 0 < result.own_mb <= result.rss_mb
