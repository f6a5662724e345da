import asyncio
import tempfile
from collections.abc import Sequence

from klaw import AgentInfo, ChatMessage, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls


async def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name, e.g. Oslo
    """
    return f"light rain in {city}, 9 °C"


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    """A stand-in for a real model: it asks for the weather tool, then answers with its result."""
    last = messages[-1]
    if last.role == "tool":
        return f"The forecast says: {last.content}"
    return tool_calls(call_tool("weather", {"city": "Oslo"}))


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        config = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}
        async with Klaw(home, config=config, model=FunctionModel(model), tools=[weather]) as agent:
            print(await agent.ask("alice", "Do I need an umbrella in Oslo?"))
            print(await agent.ask("alice", "/status"))


asyncio.run(main())
