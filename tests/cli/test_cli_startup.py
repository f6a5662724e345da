"""The command line answers without loading the engine: `klaw --help`, `klaw init` and `klaw schedule list`
import none of the engine, the stores, the model client, the web page or Telegram (each command loads
what it uses when it runs). Before, every `klaw` invocation imported all of it: ~2.3 s of CPU for
`klaw --help` on the 2-core test machine, against ~0.8 s now; a Raspberry Pi pays more.

What a process imported is read from `python -X importtime`, so the test asserts which modules were
loaded, not how long anything took.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "numpy",
    "httpx",
    "fastapi",
    "telegram",
    "onnxruntime",
    "apsw",
    "psycopg",
    "mcp",
    "klaw.engine",
    "klaw.store.protocol",
    "klaw.store.sqlite",
    "klaw.store.postgres",
    "klaw.memory.hybrid_search",
    "klaw.memory.embedder",
    "klaw.llm",
    "klaw.channels",
    "klaw.gateway",
    "klaw.tools",
)


def imported(home: Path, *args: str) -> set[str]:
    env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "klaw", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("args", [("--help",), ("init",), ("schedule", "list"), ("memory", "--help")])
def test_a_command_that_needs_no_engine_loads_none_of_it(tmp_path: Path, args: tuple[str, ...]) -> None:
    if args[0] not in ("--help", "init"):
        imported(tmp_path, "init")
    modules = imported(tmp_path, *args)
    assert "klaw.cli.app" in modules
    loaded = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert loaded == [], f"`klaw {' '.join(args)}` loaded {loaded[:8]}"
