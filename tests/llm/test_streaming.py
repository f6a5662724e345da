"""Streaming chat completions over SSE, and assembling the deltas into one answer."""

from __future__ import annotations

import contextlib
import json

import pytest

from klaw.llm.errors import LlmMalformedResponseError, LlmServerError, LlmTimeoutError
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage, StreamDelta, ToolCallFragment, Usage
from klaw.llm.protocol import StreamAccumulator, collect
from tests.llm.conftest import ClientFactory


async def test_streamed_text_arrives_in_pieces_and_assembles(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    openai_server.reply_text("The quick brown fox jumps over the lazy dog.")
    accumulator = StreamAccumulator()
    pieces: list[str] = []

    async for delta in make_client().stream([ChatMessage.user("go")]):
        accumulator.add(delta)
        if delta.content:
            pieces.append(delta.content)

    response = accumulator.result()
    assert len(pieces) > 3
    assert response.content == "The quick brown fox jumps over the lazy dog."
    assert response.finish_reason == "stop"
    assert response.model == "llama3.2"
    assert response.usage is not None
    assert response.usage.completion_tokens > 0
    assert accumulator.finished


async def test_stream_request_asks_for_sse_and_usage(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    await collect(make_client().stream([ChatMessage.user("go")], temperature=0.0))

    body = openai_server.requests[-1].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.0


async def test_streamed_tool_call_fragments_assemble(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    long_args = {"query": "weather in Reykjavík tomorrow morning", "units": "metric", "days": 2}
    openai_server.reply_tool_calls([("get_time", {"tz": "Europe/Berlin"}), ("search", long_args)], content="Checking")
    fragments: list[ToolCallFragment] = []
    accumulator = StreamAccumulator()

    async for delta in make_client().stream([ChatMessage.user("go")]):
        fragments.extend(delta.tool_calls)
        accumulator.add(delta)

    response = accumulator.result()
    assert len(fragments) > 6  # arguments really arrived in pieces
    assert {f.index for f in fragments} == {0, 1}
    assert response.content == "Checking"
    assert response.finish_reason == "tool_calls"
    assert [c.name for c in response.tool_calls] == ["get_time", "search"]
    assert json.loads(response.tool_calls[0].arguments) == {"tz": "Europe/Berlin"}
    assert json.loads(response.tool_calls[1].arguments) == long_args
    assert response.tool_calls[0].id != response.tool_calls[1].id


async def test_stream_retries_before_the_first_byte(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(429, retry_after=1)
    openai_server.reply_error(500)
    openai_server.reply_text("ok")

    response = await collect(make_client().stream([ChatMessage.user("go")]))

    assert response.content == "ok"
    assert sleeps[0] == 1.0
    assert len(sleeps) == 2


async def test_stream_server_error_after_retries(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    for _ in range(2):
        openai_server.reply_error(500)

    with pytest.raises(LlmServerError):
        await collect(make_client(max_retries=1).stream([ChatMessage.user("go")]))

    assert len(openai_server.requests) == 2


async def test_malformed_stream_chunk(openai_server: FakeOpenAiServer, make_client: ClientFactory) -> None:
    openai_server.reply_malformed()

    with pytest.raises(LlmMalformedResponseError, match="not valid JSON"):
        await collect(make_client().stream([ChatMessage.user("go")]))


async def test_silence_between_chunks_times_out(openai_server: FakeOpenAiServer, make_client: ClientFactory) -> None:
    openai_server.reply_hang(partial="Let me think")
    received: list[StreamDelta] = []

    async def drain() -> None:
        async for delta in make_client(timeout_seconds=0.2).stream([ChatMessage.user("go")]):
            received.append(delta)

    with pytest.raises(LlmTimeoutError):
        await drain()

    assert [d.content for d in received] == ["Let me think"]


async def test_stopping_early_releases_the_stream(openai_server: FakeOpenAiServer, make_client: ClientFactory) -> None:
    openai_server.reply_text("one two three four")
    client = make_client()

    async with contextlib.aclosing(client.stream([ChatMessage.user("go")])) as deltas:
        async for _ in deltas:
            break

    assert (await client.complete([ChatMessage.user("again")])).content == "echo: again"


def _data(chunk: object) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


def _reply_sse(server: FakeOpenAiServer, *events: str) -> None:
    """The next chat reply is exactly these SSE events, written by hand as some servers send them."""
    server.reply_raw("".join(events), content_type="text/event-stream")


async def test_comments_and_usage_only_chunks_are_handled(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    _reply_sse(
        openai_server,
        ": OPENROUTER PROCESSING\n\n",
        _data({"model": "m", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}),
        _data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        _data({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}),
        "data: [DONE]\n\n",
    )

    response = await collect(make_client().stream([ChatMessage.user("go")]))

    assert response.content == "hi"
    assert response.usage == Usage(3, 1, 4)


async def test_error_event_mid_stream_is_a_server_error(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    _reply_sse(
        openai_server,
        _data({"choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]}),
        _data({"error": {"message": "provider overloaded", "code": 502}}),
    )

    with pytest.raises(LlmServerError, match="provider overloaded"):
        await collect(make_client().stream([ChatMessage.user("go")]))


async def test_stream_cut_before_the_end_is_malformed(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    _reply_sse(openai_server, _data({"choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]}))

    with pytest.raises(LlmMalformedResponseError, match="ended before"):
        await collect(make_client().stream([ChatMessage.user("go")]))


async def test_server_that_ignores_stream_true_gives_one_delta(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    whole = {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    openai_server.reply_raw(json.dumps(whole), content_type="application/json")

    response = await collect(make_client().stream([ChatMessage.user("go")]))

    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [("c1", "f", "{}")]
    assert response.finish_reason == "tool_calls"


def test_accumulator_handles_unindexed_whole_calls() -> None:
    """Some servers (older Ollama) send each tool call whole, without an index."""
    accumulator = StreamAccumulator()
    accumulator.add(StreamDelta(tool_calls=(ToolCallFragment(None, "a", "f", '{"x": 1}'),)))
    accumulator.add(StreamDelta(tool_calls=(ToolCallFragment(None, "b", "g", "{}"),), finish_reason="tool_calls"))

    calls = accumulator.result().tool_calls

    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "f", '{"x": 1}'), ("b", "g", "{}")]


def test_accumulator_with_repeated_names_and_missing_ids() -> None:
    accumulator = StreamAccumulator()
    accumulator.add(StreamDelta(tool_calls=(ToolCallFragment(0, None, "f", '{"a"'),)))
    accumulator.add(StreamDelta(tool_calls=(ToolCallFragment(0, None, "f", ": 1}"),)))

    (call,) = accumulator.result().tool_calls

    assert (call.id, call.name, call.arguments) == ("call_0", "f", '{"a": 1}')
    assert accumulator.result().content is None
    assert not accumulator.finished


async def test_a_streamed_lone_surrogate_is_u_fffd_in_the_piece_and_the_answer(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    """A piece holding half an emoji (the escape `\\ud83d`, valid JSON, not text) is passed on, to the
    person's screen and the log, as U+FFFD: before, it reached the socket and SQLite as it was and
    failed the turn where it was first encoded."""
    call = {"index": 0, "id": "c1", "function": {"name": "memory_save", "arguments": '{"text": "a\\ud800"}'}}
    _reply_sse(
        openai_server,
        _data({"choices": [{"index": 0, "delta": {"content": "cut \ud83d"}, "finish_reason": None}]}),
        _data({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}),
        _data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        "data: [DONE]\n\n",
    )
    pieces: list[str] = []
    accumulator = StreamAccumulator()
    async for delta in make_client().stream([ChatMessage.user("go")]):
        accumulator.add(delta)
        pieces.extend([delta.content] if delta.content else [])
    assert pieces == ["cut ", "\ufffd"]  # the half waited for its other half, which never came
    response = accumulator.result()
    assert response.content == "cut \ufffd"
    assert response.tool_calls[0].arguments == '{"text": "a\\ud800"}'  # JSON text: made text once parsed


async def test_an_emoji_whose_halves_come_in_two_chunks_is_joined_back(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    """A server that cut an emoji's UTF-16 pair between two chunks (`\\ud83d` ending one, `\\ude00`
    opening the next): each chunk made text alone gave two U+FFFD where the person wrote one emoji.
    The first half waits for the next piece of its stream (the text, or the same tool call's arguments);
    a first half whose second never comes is one U+FFFD at the end."""
    first = {"index": 0, "id": "c1", "function": {"name": "memory_save", "arguments": '{"text": "\ud83d'}}
    second = {"index": 0, "function": {"arguments": '\ude00"}'}}
    _reply_sse(
        openai_server,
        _data({"choices": [{"index": 0, "delta": {"content": "smile \ud83d"}, "finish_reason": None}]}),
        _data({"choices": [{"index": 0, "delta": {"content": "\ude00 and \ud83d"}, "finish_reason": None}]}),
        _data({"choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]}),
        _data({"choices": [{"index": 0, "delta": {"tool_calls": [second]}, "finish_reason": None}]}),
        _data({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        "data: [DONE]\n\n",
    )
    pieces: list[str] = []
    accumulator = StreamAccumulator()
    async for delta in make_client().stream([ChatMessage.user("go")]):
        accumulator.add(delta)
        pieces.extend([delta.content] if delta.content else [])
    assert "".join(pieces) == "smile \U0001f600 and \ufffd"  # the last half never got its second
    assert all(piece.encode("utf-8") for piece in pieces)  # each piece is text as it is passed on
    response = accumulator.result()
    assert response.content == "smile \U0001f600 and \ufffd"
    assert json.loads(response.tool_calls[0].arguments) == {"text": "\U0001f600"}
