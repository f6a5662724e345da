"""A reply larger than one socket frame (1 MiB), and a long streamed one, as a person gets them (decision 443).

Before: the engine sent such a reply in parts and each channel showed the first as the whole reply (a piped
`klaw chat` printed 1,048,190 of 1,500,004 characters and exited 0; the web API's `?wait=` returned the
first part), while the gateway confirmed the rest unseen; splitting a line costed it a character at a time
(seconds on the engine's loop); and each of a streamed reply's few-character pieces was a frame the turn
waited for (a 1.5 MB reply came 126 s later, after the web API had returned null).
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from klaw import FunctionModel, Klaw
from klaw.channels.web.channel import WebChannel
from klaw.config.channels import WebChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.engine.frames import MAX_FRAME_BYTES, DeltaFrame
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.stack import running_stack
from tests.cli.piped_chat import piped
from tests.engine import short_socket_dir
from tests.gateway.test_engine_queries_and_streaming import RecordingChannel

# One line longer than a frame, then another; of long words, so the fake model streams it in 1,100 pieces.
OVER_A_FRAME = ("x" * 999 + " ") * (MAX_FRAME_BYTES // 1000 + 50) + "\nEND"
WORDS = "".join(f"word{n} " for n in range(3000))


async def test_a_piped_chat_attached_to_an_engine_prints_a_reply_over_a_frame_whole() -> None:
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
    with short_socket_dir() as root:
        home = root / "home"
        model = FunctionModel(lambda _m, _i: OVER_A_FRAME, chunk_chars=1000)
        async with Klaw(home, config=config, model=model, listen=True):
            code, out, err = await piped({**os.environ, "KLAW_HOME": str(home)}, "give me everything")
    assert code == 0, err
    assert out == OVER_A_FRAME + "\n"  # before: the first 1,048,190 characters


async def test_the_web_api_and_a_streaming_channel_get_a_reply_over_a_frame_whole() -> None:
    made: list[Any] = []
    side = RecordingChannel("side")

    def channels(home: KlawHome, loaded: LoadedConfig, _server: FakeOpenAiServer) -> list[Any]:
        made.append(WebChannel(home, WebChannelConfig(port=0), loaded))
        return [made[0], side]

    async with running_stack(channels) as stack:
        web: WebChannel = made[0]
        stack.server.reply_text(OVER_A_FRAME)
        headers = {"Authorization": f"Bearer {web.token}"}
        async with httpx.AsyncClient(base_url=web.url, headers=headers, timeout=90) as client:
            answer = await client.post("/api/messages?wait=60", json={"text": "give me everything"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["reply"]["text"] == OVER_A_FRAME  # before: the first part, or null
        # A streamed reply of 3,000 words comes in a few pieces, not one frame per word, then whole once.
        stack.server.reply_text(WORDS)
        sent = await stack.gateway.submit("side", "main", "count")
        await side.wait_for(lambda: len(side.outbound()) == 1)
        deltas = [frame.text for frame in side.frames if isinstance(frame, DeltaFrame)]
        assert "".join(deltas) == WORDS and 1 <= len(deltas) < 100, len(deltas)  # before: 3,000
        [reply] = side.outbound()
        assert reply.text == WORDS and reply.reply_to == sent.id
