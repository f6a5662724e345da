"""A remote embedder that hangs does not hold up turns: the query embedding has a deadline
(`embedder.queryTimeoutSeconds`), after which recall goes on with full-text search alone.

The embedder is the engine's `openai` backend over real HTTP to the fake server, whose /v1/embeddings
request is held until the test releases it; the deadline is a short real one (0.3 s), the HTTP
timeout an hour, so a turn that waited for the embedding would never end within the 10 s guard.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.engine.harness import running_engine
from tests.engine.test_embedding_wiring import EMBEDDING_MODEL, embedding_inputs, held_request

EMBEDDER = {
    "backend": "openai",
    "model": EMBEDDING_MODEL,
    "dim": 16,
    "timeoutSeconds": 3600,
    "queryTimeoutSeconds": 0.3,
    "pipelineEnabled": False,  # only turns ask the server: each request here is a turn's query
}
EARLIER = "the spare key to the boathouse is under the blue flowerpot"
QUESTION = "where did we leave the spare key to the boathouse"


async def test_a_hanging_embedder_delays_no_turn_and_recall_uses_full_text(tmp_path: Path) -> None:
    async with running_engine(tmp_path, embedder=EMBEDDER, context={"slidingWindow": 2}) as h:
        await h.turn(EARLIER)
        for n in range(2):
            await h.turn(f"small talk number {n} about the weather")
        arrived, release = held_request(h.server)
        try:
            async with asyncio.timeout(10):
                reply = await h.turn(QUESTION)
                await arrived.wait()
            assert reply.text == f"echo: {QUESTION}"
            assert embedding_inputs(h.server)[-1] == [QUESTION]  # auto-RAG asked, and did not wait for it
            sent = "\n".join(str(m.get("content")) for m in h.last_request_messages())
            assert EARLIER in sent  # recalled by its words alone, out of the 2-message window
        finally:
            release.set()
