"""A program reads a reply while the model writes it: `async for piece in agent.stream(chat, text)`, then
`await stream.text()` for the reply as stored, with `ask`'s errors (TurnFailed, MessageRefused). Before,
`Klaw` had only `ask`, the whole reply at the turn's end, though the engine streamed the same turn to the
web page (newcomer17; decision 455)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from klaw import (
    AgentInfo,
    AgentMessage,
    ChatMessage,
    FunctionModel,
    InvalidArgument,
    Klaw,
    LlmBadRequestError,
    MessageRefused,
    ReplyPiece,
    StreamDelta,
    ToolCallFragment,
    TurnFailed,
)
from klaw.llm.fake_server import FakeOpenAiServer
from tests.test_library import CONFIG


async def test_a_program_reads_the_pieces_of_a_reply_as_the_model_writes_them(tmp_path: Path) -> None:
    read_first = asyncio.Event()

    def whole(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "asked whole"

    async def writing(messages: Sequence[ChatMessage], info: AgentInfo) -> AsyncIterator[str]:
        if messages[-1].content == "fail":
            yield "Half a "
            raise LlmBadRequestError("no such model", model_id="stand-in", base_url=None)
        yield "Light rain "
        await read_first.wait()  # the rest only once the program has read the first piece: it is live
        yield "in Oslo, "
        yield "9 °C"

    model = FunctionModel(whole, stream_function=writing)
    told: list[AgentMessage] = []

    async def on_message(message: AgentMessage) -> None:
        told.append(message)

    async with Klaw(tmp_path / "home", config=CONFIG, model=model, on_message=on_message) as agent:
        stream = agent.stream("alice", "Do I need an umbrella?")
        pieces = []
        async for piece in stream:
            pieces.append(piece)
            read_first.set()
        assert pieces[0] == "Light rain "
        assert "".join(pieces) == "Light rain in Oslo, 9 °C"
        assert await stream.text() == "Light rain in Oslo, 9 °C"
        # `ask` stays one whole model call: only a waiting stream asks the model to stream
        assert await agent.ask("alice", "and tomorrow?") == "asked whole"
        assert [call.info.streamed for call in model.calls] == [True, False]
        history = await agent.history("alice")
        assert [entry.text for entry in history if entry.role == "assistant"] == [
            "Light rain in Oslo, 9 °C",
            "asked whole",
        ]

        # a slash command's reply, which no model writes, comes as one piece
        status = [piece async for piece in agent.stream("alice", "/status")]
        assert len(status) == 1 and "function:whole" in status[0]

        # the same errors as ask: after the pieces written, TurnFailed with the model's error as its cause
        failing = agent.stream("alice", "fail")
        got: list[str] = []

        async def read_all() -> None:
            async for piece in failing:
                got.append(piece)

        with pytest.raises(TurnFailed) as failed:
            await read_all()
        assert got == ["Half a "]
        assert isinstance(failed.value.cause, LlmBadRequestError)
        with pytest.raises(TurnFailed):
            await failing.text()
        with pytest.raises(MessageRefused):
            await anext(aiter(agent.stream("alice", "  ")))

        # leaving the loop early stops the waiting, as a cancelled ask: the reply goes to on_message
        read_first.clear()
        early = agent.stream("alice", "once more")
        reader = aiter(early)
        assert await anext(reader) == "Light rain "
        await reader.aclose()  # type: ignore[attr-defined]  # what `break` leads to
        read_first.set()
        for _ in range(200):
            if told:
                break
            await asyncio.sleep(0.01)
        assert [(m.kind, m.text) for m in told] == [("reply", "Light rain in Oslo, 9 °C")]


async def test_a_reply_is_streamed_from_an_openai_protocol_server(tmp_path: Path) -> None:
    async with FakeOpenAiServer() as server:
        config = {
            **CONFIG,
            "models": {"fake/small": {"baseUrl": server.base_url, "maxRetries": 0}},
            "routing": {"default": "fake/small"},
        }
        server.reply_text("Streamed from the server, piece by piece.")
        async with Klaw(tmp_path / "home", config=config) as agent:
            stream = agent.stream("bob", "hello")
            pieces = [piece async for piece in stream]
            assert "".join(pieces) == "Streamed from the server, piece by piece."
            assert await stream.text() == "Streamed from the server, piece by piece."
    assert [request.body.get("stream") for request in server.chat_requests] == [True]


async def test_pieces_say_their_round_and_text_first_then_the_loop_gives_them_again(tmp_path: Path) -> None:
    """Decision 460: a sentence written before a tool call was streamed like the answer, though the stored
    reply is the last round's, and a program could not tell them apart: each piece says its round now.
    `await stream.text()` before the loop made the loop raise "read once"; as llm's Response, the stream
    keeps its pieces: text() alone runs the turn, a loop after it gives the pieces again."""

    async def weather(city: str) -> str:
        """The weather in a city."""
        return f"rain in {city}"

    async def writing(messages: Sequence[ChatMessage], info: AgentInfo) -> AsyncIterator[str | StreamDelta]:
        if info.turn_round == 1:
            yield "Let me check. "
            yield StreamDelta(tool_calls=(ToolCallFragment(0, "call_1", "weather", '{"city": "Oslo"}'),))
        else:
            yield "Rain "
            yield "in Oslo."

    model = FunctionModel(lambda messages, info: "whole", stream_function=writing)
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, tools=[weather]) as agent:
        stream = agent.stream("alice", "Umbrella?")
        assert await stream.text() == "Rain in Oslo."  # no loop yet: the turn runs to its end
        pieces = [piece async for piece in stream]  # was InvalidArgument: "a ReplyStream is read once"
        by_round: dict[int, str] = {}
        for piece in pieces:  # in the batches the engine sends, each within its round
            by_round[piece.turn_round] = by_round.get(piece.turn_round, "") + piece
        assert by_round == {1: "Let me check. ", 2: "Rain in Oslo."}
        assert "".join(piece for piece in pieces if piece.turn_round == pieces[-1].turn_round) == await stream.text()
        assert [piece async for piece in stream] == pieces  # and again
        status = [piece async for piece in agent.stream("alice", "/status")]
        assert isinstance(status[0], ReplyPiece) and status[0].turn_round == 1


async def test_text_right_after_a_break_gives_the_whole_reply(tmp_path: Path) -> None:
    """`break` out of the loop, then `await stream.text()`: the loop's generator is closed a moment after the
    break (the event loop's asyncgen finalizer), which cancelled the ask under the text() awaiting it, a bare
    CancelledError that ended an `asyncio.run` program (adversary26). text() waiting keeps the turn's
    waiting now: it gives the whole reply, as llm's Response does; a stream left with nothing waiting still
    hands its reply to on_message, and a later text() or loop says why it has none (decision 468)."""
    go_on = asyncio.Event()

    async def writing(messages: Sequence[ChatMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "first "
        await go_on.wait()  # the rest only once the program has left its loop
        yield "and the rest"

    told: list[AgentMessage] = []

    async def on_message(message: AgentMessage) -> None:
        told.append(message)

    model = FunctionModel(lambda messages, info: "whole", stream_function=writing)
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, on_message=on_message) as agent:
        stream = agent.stream("alice", "hi")
        async for piece in stream:
            assert piece == "first "
            break
        asyncio.get_running_loop().call_later(0.05, go_on.set)  # after the generator's close has run
        assert await stream.text() == "first and the rest"  # was a bare CancelledError
        assert [piece async for piece in stream] == ["first ", "and the rest"]
        assert told == []  # the reply came to text(), not also to on_message

        go_on.clear()
        left = agent.stream("alice", "again")
        async for _piece in left:
            break
        for _ in range(5):  # the generator's close runs with nothing else waiting: the waiting stops
            await asyncio.sleep(0)
        with pytest.raises(InvalidArgument, match="stopped waiting before the reply's end"):
            await left.text()
        with pytest.raises(InvalidArgument, match="on_message"):
            assert [piece async for piece in left] == ["first "]
        go_on.set()
        for _ in range(200):
            if told:
                break
            await asyncio.sleep(0.01)
        assert [(m.kind, m.text) for m in told] == [("reply", "first and the rest")]
