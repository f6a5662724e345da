"""`klaw bench locomo … > file` as newcomer20 ran it (decision 490): the stages said on stderr while it runs
(rich draws no bars into a pipe: 8 minutes of nothing), and the tables in the file whole, as locomo.md has
them (rich's 80 columns cut them: "AllHit…", a title wrapped over 5 lines)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "locomo_tiny.json"


def test_locomo_into_a_pipe_says_its_stages_and_prints_whole_tables(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES") and not k.startswith("KLAW")}
    env |= {"KLAW_HOME": str(tmp_path / "home"), "KLAW__EMBEDDER__BACKEND": "fake", "KLAW__EMBEDDER__DIM": "32"}
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "klaw", "bench", "locomo", "--data", str(FIXTURE), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    stages = [line for line in result.stderr.splitlines() if re.search(r": \d+/\d+$", line)]
    assert len(stages) >= 2, result.stderr
    markdown = (out / "locomo.md").read_text(encoding="utf-8")
    table_rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert table_rows and max(len(row) for row in table_rows) > 80  # wide enough to have been cut
    for row in table_rows:
        assert row in result.stdout, row
