"""`klaw bench send` as a person runs it: a whole engine, message_send called through its registry, the figure
printed and written as JSON. Not a speed test: it checks the bench times sends that were sent."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench.test_start_bench import klaw


def test_bench_send_times_sends_that_reached_the_channel(tmp_path: Path) -> None:
    out = tmp_path / "send.json"
    done = klaw("bench", "send", "--runs", "5", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "message_send to an in-process channel: p50" in done.stdout and "(n=5)" in done.stdout, done.stdout
    send = json.loads(out.read_text(encoding="utf-8"))["send"]
    assert send["count"] == 5 and 0 < send["p50_ms"] <= send["p95_ms"], send
