"""`FunctionModel`: the in-process chat model whose answers come from a test's function.

It must behave as the `ChatModel` contract says, streamed and whole alike, or tests written on it
would pass on a loop the real client breaks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence

import pytest

from klaw.llm.errors import LlmServerError
from klaw.llm.function_model import AgentInfo, FunctionModel, call_tool, tool_calls
from klaw.llm.messages import ChatMessage, ChatResponse, StreamDelta, ToolCallFragment, ToolSpec
from klaw.llm.protocol import ChatModel, StreamAccumulator, collect

WEATHER = ToolSpec("weather", "The weather in a city.", {"type": "object", "properties": {"city": {"type": "string"}}})


def weather_then_answer(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    if info.round == 1:
        return tool_calls(call_tool("weather", {"city": "Zürich, the one in Switzerland"}), content="Let me look.")
    return f"It is {messages[-1].content}."


def test_it_is_a_chat_model() -> None:
    assert isinstance(FunctionModel(weather_then_answer), ChatModel)
    assert FunctionModel(weather_then_answer, name="fake/fn").model_id == "fake/fn"


async def test_complete_returns_the_functions_answer_and_records_the_request() -> None:
    model = FunctionModel(weather_then_answer)
    conversation = [ChatMessage.user("weather?")]

    first = await model.complete(conversation, [WEATHER], temperature=0.2, max_tokens=50)
    conversation += [first.message, ChatMessage.tool("call_weather", "sunny", name="weather")]
    second = await model.complete(conversation)

    assert first.tool_calls[0].name == "weather"
    assert json.loads(first.tool_calls[0].arguments) == {"city": "Zürich, the one in Switzerland"}
    assert first.content == "Let me look." and first.finish_reason == "tool_calls"
    assert (second.content, second.finish_reason, second.tool_calls) == ("It is sunny.", "stop", ())
    assert [call.info.round for call in model.calls] == [1, 2]
    assert model.calls[0].info.tool_names == ("weather",)
    assert (model.calls[0].info.temperature, model.calls[0].info.max_tokens) == (0.2, 50)
    assert model.calls[0].messages == (ChatMessage.user("weather?"),)  # a copy: the list grew since
    assert model.calls[1].info.tools == ()


async def test_an_async_function_is_awaited() -> None:
    async def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "later"

    assert (await FunctionModel(answer).complete([ChatMessage.user("hi")])).content == "later"


async def test_streaming_sends_pieces_that_assemble_to_the_whole_answer() -> None:
    streamed = FunctionModel(weather_then_answer, chunk_chars=3)
    whole = FunctionModel(weather_then_answer)
    deltas = [delta async for delta in streamed.stream([ChatMessage.user("weather?")], [WEATHER])]

    accumulator = StreamAccumulator()
    for delta in deltas:
        accumulator.add(delta)
    expected = await whole.complete([ChatMessage.user("weather?")], [WEATHER])
    assert accumulator.finished
    assert accumulator.result() == expected
    assert [d.content for d in deltas if d.content] == ["Let", " me", " lo", "ok."]
    fragments = [f for d in deltas for f in d.tool_calls]
    assert fragments[0] == ToolCallFragment(0, id="call_weather", name="weather")
    assert len(fragments) > 3 and all(f.index == 0 and f.arguments for f in fragments[1:])
    assert streamed.calls[0].info.streamed and not whole.calls[0].info.streamed


async def test_several_tool_calls_stream_by_index() -> None:
    def two(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse:
        return tool_calls(call_tool("a", {"x": 1}, id="c1"), call_tool("b", '{"y": ', id="c2"))

    answer = await collect(FunctionModel(two).stream([ChatMessage.user("go")]))
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("c1", "a", '{"x": 1}'), ("c2", "b", '{"y": ')]


async def test_a_stream_function_sends_its_own_deltas() -> None:
    async def pieces(messages: Sequence[ChatMessage], info: AgentInfo) -> AsyncIterator[StreamDelta | str]:
        yield "Hel"
        yield "lo"
        yield StreamDelta(finish_reason="length")

    model = FunctionModel(weather_then_answer, stream_function=pieces)
    answer = await collect(model.stream([ChatMessage.user("hi")]))
    assert (answer.content, answer.finish_reason) == ("Hello", "length")
    assert model.calls[0].info.streamed


async def test_an_error_the_function_raises_reaches_the_caller_streamed_or_not() -> None:
    def down(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        raise LlmServerError("the server is down", model_id="fn", base_url=None)

    model = FunctionModel(down)
    with pytest.raises(LlmServerError):
        await model.complete([ChatMessage.user("hi")])
    with pytest.raises(LlmServerError):
        await collect(model.stream([ChatMessage.user("hi")]))
    assert len(model.calls) == 2


async def test_a_closed_model_refuses_to_answer() -> None:
    model = FunctionModel(weather_then_answer)
    await model.aclose()
    with pytest.raises(RuntimeError, match="after aclose"):
        await model.complete([ChatMessage.user("hi")])


def test_two_calls_of_one_tool_in_an_answer_get_their_own_ids() -> None:
    """adversary14: `call_tool`'s default id is the tool's name, so two calls of one tool in one answer went to
    the model as two results under one id."""
    answer = tool_calls(call_tool("echo", {"text": "a"}), call_tool("echo", {"text": "b"}), call_tool("clock"))
    assert [call.id for call in answer.tool_calls] == ["call_echo", "call_echo_2", "call_clock"]
    given = tool_calls(call_tool("echo", id="x"), call_tool("echo", id="x_2"), call_tool("echo", id="x"))
    assert [call.id for call in given.tool_calls] == ["x", "x_2", "x_3"]
