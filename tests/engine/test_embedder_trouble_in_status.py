"""`/status` names why vectors are not being made: the local embedder's load failed at start (no room
or no folder for its ONNX cache) and the embedding queue's last call failed, until one succeeds.

In `klaw chat` the engine's log is a file and the screen shows only "(klaw logged a warning: see …)", so a
person whose memory silently recalls by full text alone had to read the log to learn why. A real MiniLM
(onnx-fp32) is loaded, and its cache folder is a plain file, as a home whose disk refused the folder
leaves it; removing the file is the fix, and the next retry then embeds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.engine.harness import CHAT, Harness, running_engine

LOCAL_EMBEDDER = {"backend": "minilm", "runtime": "onnx-fp32"}


async def status(h: Harness) -> str:
    reply = (await h.engine.submit(CHAT, "/status")).command_reply
    assert reply is not None
    return reply


async def status_once_loaded_or_failed(h: Harness) -> str:
    """`/status` after the load at start has ended (it runs beside the rest of start-up, seconds)."""
    [load] = [task for task in asyncio.all_tasks() if task.get_name() == "embedder-warm-up"]
    async with asyncio.timeout(60):
        await asyncio.wait({load})
    return await status(h)


async def test_an_embedder_that_cannot_load_is_named_in_status_until_an_embedding_succeeds(tmp_path: Path) -> None:
    cache = tmp_path / "home" / "cache"
    cache.mkdir(parents=True)
    (cache / "embedder").write_text("not a folder")  # where the ONNX graph would be kept
    async with running_engine(tmp_path, embedder=LOCAL_EMBEDDER) as h:
        said = await status_once_loaded_or_failed(h)
        assert "Embedder: sentence-transformers/all-MiniLM-L6-v2 could not load at start:" in said
        assert "Could not write the embedder's ONNX cache" in said and "embedder.runtime: numpy" in said

        await h.turn("the spare key hangs behind the blue kettle")
        async with asyncio.timeout(60):
            await h.engine.embedding_queue.wait_idle()
        said = await status(h)
        assert "Embedding queue: 2 pending, 0 failed; the last try failed: EmbedderError: Could not write" in said

        (cache / "embedder").unlink()  # the person's fix
        await h.clock.advance(1)  # the first retry is due after a second
        async with asyncio.timeout(60):
            await h.engine.embedding_queue.wait_idle()
        said = await status(h)
        assert "Embedding queue: 0 pending, 0 failed\n" in said, said
        assert "could not load at start" in said  # what happened at start stays said; the queue says it works now
