"""A log line longer than any record klaw writes is reported as malformed and skipped without being held
(decision 329): `klaw log check` on a file with one 300 MB line took 1.2 GB of memory, reading it whole.
Every reader goes around it: log check, reindex, `/forget`'s rewrite (which keeps the line as it is), and
the gateway's buffer."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from klaw.engine.frames import InboundFrame, encode_frame
from klaw.gateway.buffer import InboundBuffer
from klaw.memory.log_rewrite import remove_lines
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home

HUGE_CONTENT = 300 * 1024 * 1024
JUST_OVER = 32 * 1024 * 1024  # klaw.store.log_format.MAX_RECORD_BYTES, and the line's JSON around it

# Peak memory of the whole `klaw log check` process (Python, klaw's imports, the rest of the log) with the
# line skipped; reading the line whole took 1.2 GB.
PEAK_BOUND_KB = 400 * 1024


HEAD = b'{"id":"huge","channel":"console","chat_id":"me","role":"user","type":"text","content":"'
TAIL = b'","created_at":"2026-03-01T11:00:00.000Z"}\n'


def _put_in_the_middle(log_file: Path, size: int) -> None:
    """A line of `size` bytes of content, in a user message's shape, after the file's third line."""
    lines = log_file.read_bytes().splitlines(keepends=True)
    piece = b"x" * (1 << 20)
    with log_file.open("wb") as out:
        out.write(b"".join(lines[:3]) + HEAD)
        for _ in range(size // len(piece)):
            out.write(piece)
        out.write(TAIL + b"".join(lines[3:]))


def _peak_kb(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """`klaw ARGS` run under a small Python parent that reports the child's peak resident memory (KiB)."""
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run([sys.executable, '-m', 'klaw', *sys.argv[1:]], capture_output=True, text=True)\n"
        "sys.stdout.write(done.stdout)\nsys.stderr.write(done.stderr)\n"
        "print('PEAK', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(done.returncode)\n"
    )
    env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", measure, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    peak = int(done.stderr.rsplit("PEAK", 1)[1].split()[0])
    return done, peak


def test_log_check_skips_a_300_mb_line_without_holding_it(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    log_file = next((home / "conversations").glob("*/*.jsonl"))
    _put_in_the_middle(log_file, HUGE_CONTENT)
    try:
        result, peak = _peak_kb(home, "log", "check")
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert "6 records, 1 malformed line" in result.stdout
        assert f"{log_file}:4: longer than 32 MiB, more than any record klaw writes" in result.stdout
        assert peak < PEAK_BOUND_KB, f"klaw log check peaked at {peak // 1024} MiB"
    finally:
        log_file.unlink()


def test_reindex_and_forget_go_around_a_line_too_long_to_read(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    log_file = next((home / "conversations").glob("*/*.jsonl"))
    _put_in_the_middle(log_file, JUST_OVER)
    result = klaw_here(home, "reindex")
    assert result.returncode == 0, result.stderr
    assert f"{log_file}:4: longer than 32 MiB" in result.stdout
    assert " 6 │" in klaw_here(home, "db", "info").stdout
    size = log_file.stat().st_size
    first = json.loads(log_file.read_bytes().split(b"\n", 1)[0])
    assert remove_lines(log_file, {first["id"]}) == 1
    kept = log_file.read_bytes()
    assert first["id"].encode() not in kept[:1000] and len(kept) > size - 1000  # the long line kept, whole
    assert kept.count(b"\n") == 6
    # forgetting the long line's own record removes it: it was kept, and the forget said it erased it (465)
    assert remove_lines(log_file, {"huge"}) == 1
    assert log_file.stat().st_size < 10_000 and b'"huge"' not in log_file.read_bytes()
    assert log_file.read_bytes().count(b"\n") == 5


async def test_the_gateway_buffer_skips_a_line_longer_than_a_frame_and_keeps_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "gateway"
    folder.mkdir()
    first = InboundFrame(id="m1", channel="web", chat_id="main", text="one")
    second = InboundFrame(id="m2", channel="web", chat_id="main", text="two")
    long = b'{"type":"inbound","id":"m3","channel":"web","chat_id":"main","text":"' + b"y" * (3 << 20) + b'"}\n'
    (folder / "inbound.jsonl").write_bytes(encode_frame(first) + long + encode_frame(second))
    buffer = await asyncio.wait_for(InboundBuffer.open(folder), 10)
    assert [frame.id for frame in buffer.pending()] == ["m1", "m2"]
