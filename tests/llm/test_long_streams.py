"""Real streams with many chunks without answer text are still read whole after decision 334 made a chunk
carrying nothing weigh 100 characters: a thinking model's reasoning (tens of thousands of chunks) counts by
its characters, a field klaw does not know as one, and the handful of empty chunks every stream has cost
nothing a person would notice."""

from __future__ import annotations

import json

import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage
from tests.llm.conftest import ClientFactory

REASONING_CHUNKS = 25_000  # weighed as empty chunks (100 each) they would pass the 2,000,000 limit


def _event(delta: dict[str, object], finish: str | None = None) -> str:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n"


@pytest.mark.parametrize(
    "thinking",
    [{"reasoning_content": "x"}, {"reasoning": "y"}, {"content": "", "reasoning_details": [{"type": "t"}]}],
    ids=["reasoning_content", "reasoning", "unknown-field"],
)
async def test_a_thinking_model_s_long_run_without_text_is_read(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, thinking: dict[str, object]
) -> None:
    stream = _event({"role": "assistant", "content": ""}) + _event(thinking) * REASONING_CHUNKS
    stream += _event({"content": "the answer"}) + _event({}, "stop") + "data: [DONE]\n\n"
    openai_server.reply_raw(stream, content_type="text/event-stream")
    client = make_client()

    text = [delta.content async for delta in client.stream([ChatMessage.user("think")]) if delta.content]

    assert "".join(text) == "the answer"


async def test_a_stream_with_some_empty_chunks_is_read(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    """A few thousand empty chunks between words (19,000 at most fit under the limit with an answer)."""
    stream = "".join(_event({"content": f"w{i} "}) + _event({"content": ""}) * 10 for i in range(1000))
    stream += _event({}, "stop") + "data: [DONE]\n\n"
    openai_server.reply_raw(stream, content_type="text/event-stream")
    client = make_client()

    text = [delta.content async for delta in client.stream([ChatMessage.user("hi")]) if delta.content]

    assert len(text) == 1000
