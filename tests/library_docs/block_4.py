import asyncio
import tempfile
from collections.abc import Sequence

from klaw import AgentInfo, AgentMessage, ChatMessage, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls

INSTRUCTION = "look up the train times to Bergen"


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    """A stand-in model: the chat's turn starts a subagent run, which answers its instruction."""
    last = messages[-1]
    if last.role == "tool":
        return "I started a run; its answer will arrive in this chat."
    if last.content == INSTRUCTION:
        return "trains to Bergen leave at 08:25 and 15:58"
    return tool_calls(call_tool("subagent_spawn", {"task_name": "trains", "message": INSTRUCTION}))


async def main() -> None:
    inbox: asyncio.Queue[AgentMessage] = asyncio.Queue()
    config = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}
    with tempfile.TemporaryDirectory() as home:
        async with Klaw(home, config=config, model=FunctionModel(model), on_message=inbox.put) as agent:
            print(await agent.ask("alice", "look up the train times in the background"))
            message = await inbox.get()  # the subagent's answer
            print(message.task, message.text)


asyncio.run(main())
