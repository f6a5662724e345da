import asyncio
import tempfile
from collections.abc import Sequence

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return "Noted."  # a stand-in for a real model


async def main() -> None:
    config = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}
    with tempfile.TemporaryDirectory() as home:
        async with Klaw(home, config=config, model=FunctionModel(model)) as agent:
            await agent.ask("alice", "remember that the gate code is 2468")
            for entry in await agent.history("alice"):
                print(entry.role, entry.type, entry.text)
            print([turn.status for turn in await agent.turns("alice")])  # ['completed']


asyncio.run(main())
