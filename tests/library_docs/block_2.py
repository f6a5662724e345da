import asyncio
import tempfile
from collections.abc import Sequence

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return f"You said: {messages[-1].content}"  # a stand-in for a real model


config = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}
with tempfile.TemporaryDirectory() as home, asyncio.Runner() as runner:
    agent = runner.run(Klaw(home, config=config, model=FunctionModel(model)).start())
    print(runner.run(agent.ask("alice", "hello")))
    runner.run(agent.aclose())
