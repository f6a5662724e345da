import asyncio
import tempfile
from collections.abc import AsyncIterator, Sequence

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw


def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return "Light rain in Oslo, 9 °C."  # what an ask gets: the whole answer at once


async def writing(messages: Sequence[ChatMessage], info: AgentInfo) -> AsyncIterator[str]:
    for piece in ["Light rain ", "in Oslo, ", "9 °C."]:  # a stand-in model writing its answer
        yield piece


async def main() -> None:
    config = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}
    model = FunctionModel(answer, stream_function=writing)
    with tempfile.TemporaryDirectory() as home:
        async with Klaw(home, config=config, model=model) as agent:
            stream = agent.stream("alice", "Do I need an umbrella?")
            async for piece in stream:
                print(piece, end="", flush=True)
            print()
            print(await stream.text())  # the reply as stored, as ask returns it


asyncio.run(main())
