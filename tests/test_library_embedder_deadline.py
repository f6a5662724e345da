"""A remote embedding server that trickles a byte now and then never lets a read wait `timeoutSeconds`
(httpx's timeouts are per read): the background embedding queue's call never ended, every later message
waiting behind it. A whole embedding call now ends at `embedder.totalTimeoutSeconds` (ten times
`timeoutSeconds` unless set) with a worded failure: the queue logs it and backs off as for any failure,
and turns go on (their query embedding had its own deadline already) (decision 311). Driven through a
program's engine: the model is the fake OpenAI-protocol server, the embedder a real trickling HTTP server."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from klaw import Klaw
from klaw.llm.fake_server import FakeOpenAiServer
from tests.test_library_model_call_deadline import trickling

__all__ = ["trickling"]  # the fixture: a server answering 200 and then a space every 0.05 s

SAID = "the spare key to the boathouse is under the blue flowerpot by the door, next to the old rowing oars"


async def test_a_trickling_embedding_server_fails_its_call_at_the_total_deadline(
    tmp_path: Path, trickling: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="klaw.memory.embedding_queue")
    async with FakeOpenAiServer() as server:
        config = {
            "models": {"fake/x": {"baseUrl": server.base_url, "maxRetries": 0}},
            "routing": {"default": "fake/x"},
            # no totalTimeoutSeconds: the default, ten times timeoutSeconds (10 s). A read waits up to 1 s for the
            # next of the spaces sent every 0.05 s: 0.3 s ran out once under CI's load ("sent nothing for 0.3 s"),
            # the server's thread and the engine sharing one process
            "embedder": {"backend": "openai", "baseUrl": trickling, "model": "e", "dim": 8, "timeoutSeconds": 1.0},
            "summarizer": {"enabled": False},
        }
        async with Klaw(tmp_path / "home", config=config) as agent:
            assert await asyncio.wait_for(agent.ask("alice", SAID), 30) == f"echo: {SAID}"

            async def failure_said() -> str:
                while True:
                    for record in caplog.records:
                        if record.name == "klaw.memory.embedding_queue" and "failed" in record.getMessage():
                            return record.getMessage()
                    await asyncio.sleep(0.1)

            said = await asyncio.wait_for(failure_said(), 40)  # before: the call never ended
    # The message alone, or with its reply: a batch starts once the turn is over (decision 426).
    assert re.search(r"embedding [12] item\(s\) failed \(EmbedderError: ", said), said
    assert "the answer was not complete after 10 s" in said, said
    assert "will be retried" in said
