"""A model server that keeps a call open by trickling a byte now and then never lets a read wait
`timeoutSeconds` (httpx's timeouts are per read): the turn ran forever, holding its chat and an LLM slot
(adversary6 trickle.py). A whole call now ends at `totalTimeoutSeconds` (default ten times timeoutSeconds)
with the usual worded model failure (decision 298). Driven through a program's engine and the chat client,
against a real HTTP server that trickles."""

from __future__ import annotations

import asyncio
import http.server
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from klaw import Klaw, TurnFailed
from klaw.config import ModelConfig
from klaw.llm.errors import LlmTimeoutError
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient


class _Trickle(http.server.BaseHTTPRequestHandler):
    """Answers every request 200 and then one space every 0.05 s, in chunks, until the client leaves."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        streamed = bool(json.loads(self.rfile.read(int(self.headers.get("content-length", 0)))).get("stream"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while not self.server.closing.is_set():  # type: ignore[attr-defined]  # (_Server's)
                self.wfile.write(b"1\r\n \r\n")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    closing: threading.Event


@pytest.fixture
def trickling() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Trickle)
    server.closing = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()


async def test_a_trickling_server_ends_the_turn_with_a_worded_failure(tmp_path: Path, trickling: str) -> None:
    config = {
        "models": {"m": {"baseUrl": trickling, "timeoutSeconds": 1.0, "maxRetries": 0}},
        "routing": {"default": "m"},
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
    }
    async with Klaw(tmp_path / "home", config=config) as agent:
        with pytest.raises(TurnFailed) as failed:
            await asyncio.wait_for(agent.ask("alice", "hello"), 60)  # before: still waiting here
        said = str(failed.value)  # the default deadline: ten times timeoutSeconds
        assert said.startswith("Sorry, I could not answer: ") and "not complete after 10 s" in said
        assert "totalTimeoutSeconds under models.m" in said and isinstance(failed.value.cause, LlmTimeoutError)


async def test_a_trickled_stream_ends_at_the_total_deadline(trickling: str) -> None:
    config = ModelConfig(base_url=trickling, timeout_seconds=2, total_timeout_seconds=1.5, max_retries=0)
    client = OpenAiChatClient("m", config)

    async def read_it_all() -> None:
        async for _ in client.stream([ChatMessage.user("hello")]):
            pass

    try:
        with pytest.raises(LlmTimeoutError, match=r"not complete after 1\.5 s"):
            await asyncio.wait_for(read_it_all(), 60)  # before: the stream never ended
    finally:
        await client.aclose()
