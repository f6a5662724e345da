"""`Klaw.search_memory` finds what `klaw memory search` shows a person: the same hits, with the same
scores, for the same chat and query (hybrid search is the one retrieval path)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from klaw import ChatMessage, FunctionModel, Klaw, ManualClock
from klaw.llm.function_model import AgentInfo

# In the home's engine.yaml, which the command reads too (its embedder must be the one that made the vectors).
CONFIG = "embedder:\n  backend: fake\n  dim: 32\nsummarizer:\n  enabled: false\n"
SAID = [
    "I have a dog called Rex, he is three",
    "tomorrow I will buy apples",
    "the spare key is under the blue flowerpot",
    "my sister lives in Lisbon",
]
STACKED = re.compile(r"^\d+\. score (\S+), distance (\S+), FTS rank (\S+),")


def cli_hits(home: Path, query: str) -> list[tuple[str, str, str, str]]:
    """(score, distance, FTS rank, message) as the command prints them (one hit over two lines)."""
    env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "klaw", "memory", "search", query, "--chat", "library:bob", "--segment", "all"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    found = [(i, match) for i, line in enumerate(lines) if (match := STACKED.match(line))]
    return [(match[1], match[2], match[3], lines[i + 1].strip()) for i, match in found]


async def test_search_memory_gives_the_command_lines_hits_and_scores(tmp_path: Path) -> None:
    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "noted"

    home = tmp_path / "home"
    home.mkdir()
    (home / "engine.yaml").write_text(CONFIG, encoding="utf-8")
    queries = ["what pet do I have", "where is the spare key"]
    async with Klaw(home, model=FunctionModel(model), clock=ManualClock()) as agent:
        for text in SAID:
            await agent.ask("bob", text)
        await agent.engine.embedding_queue.wait_idle()
        found = {query: await agent.search_memory("bob", query, limit=10) for query in queries}
    for query in queries:
        printed = cli_hits(home, query)
        assert [(f"{hit.score:.4f}", hit.text) for hit in found[query]] == [(h[0], h[3]) for h in printed]
        library = [
            (
                f"{hit.score:.4f}",
                "-" if hit.distance is None else f"{hit.distance:.3f}",
                "-" if hit.fts_rank is None else str(hit.fts_rank),
                hit.text,
            )
            for hit in found[query]
        ]
        assert library, query  # not gated away: the command line shows them all
        assert library == printed
        assert all(hit.kind == "message" and isinstance(hit.id, str) and hit.id for hit in found[query])
    key = found["where is the spare key"]
    assert key[0].text == SAID[2] and key[0].fts_rank == 1 and key[0].score > 2 * key[-1].score
