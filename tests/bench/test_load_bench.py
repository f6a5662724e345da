"""`klaw bench load` runs end to end: real engine subprocess, real socket, a SIGKILL and a restart mid-run.

Not a speed test (figures come from running the bench); it checks the bench measures what it says:
every acknowledged message is counted as stored and as answered, across the kill.
"""

from __future__ import annotations

from pathlib import Path

from klaw.bench.load_bench import measure_load
from tests.engine import short_socket_dir


async def test_the_load_bench_counts_every_acknowledged_message_across_a_kill() -> None:
    with short_socket_dir() as directory:
        result = await measure_load(Path(directory) / "home", chats=3, seconds=3.0, kill_after=1.0)
    assert result.killed and result.turns > 0
    assert result.acknowledged == result.stored == result.answered, result.unanswered_ids
    assert result.latency.count == result.turns
