"""`klaw bench start` as a person runs it: real `klaw engine` processes started and stopped, the figures
printed and written as JSON. Not a speed test: it checks the bench measures what it says (a CPU time, a wall
time and a resident size at the ready line of each counted start), never how fast the start is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def klaw(*args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("KLAW")}
    return subprocess.run(
        [sys.executable, "-m", "klaw", *args],
        env={**env, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_bench_start_reports_cpu_wall_and_memory_to_the_engines_ready_line(tmp_path: Path) -> None:
    out = tmp_path / "start.json"
    done = klaw("bench", "start", "--runs", "1", "--embedder", "fake", "--chats", "3", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    prefix = "klaw engine (embedder fake, 3 idle chats)"  # a home of idle chats (decision 477)
    line = next(line for line in done.stdout.splitlines() if line.startswith(prefix))
    assert "to ready CPU" in line and "wall" in line and "resident" in line and "(median of 1)" in line, line
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert figures["command"] == "engine" and figures["runs"] == 1 and figures["chats"] == 3
    (run,) = figures["figures"][0]["runs"]
    assert min(run["cpu_s"], run["wall_s"], run["rss_mb"]) > 0, run


def test_bench_start_against_a_folder_without_klaw_says_what_to_name(tmp_path: Path) -> None:
    done = klaw("bench", "start", "--against", str(tmp_path))
    assert done.returncode == 2
    assert f"--against {tmp_path}: no klaw package there" in done.stdout and "Traceback" not in done.stderr
