import asyncio
import tempfile
from collections.abc import Sequence

from klaw import (
    AgentInfo,
    ChatMessage,
    FunctionModel,
    Klaw,
    LlmConnectionError,
    LlmServerError,
    LlmTimeoutError,
    TurnFailed,
)


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    # a stand-in for a model server that is down
    raise LlmConnectionError("cannot connect", model_id="stand-in", base_url="http://127.0.0.1:9/v1")


async def main() -> None:
    config = {"embedder": {"backend": "fake"}, "summarizer": {"enabled": False}}
    with tempfile.TemporaryDirectory() as home:
        async with Klaw(home, config=config, model=FunctionModel(model)) as agent:
            try:
                print(await agent.ask("alice", "hello"))
            except TurnFailed as failed:
                if isinstance(failed.cause, (LlmConnectionError, LlmTimeoutError, LlmServerError)):
                    print("the model server is down or busy: ask again later")
                else:
                    raise  # a mistake to fix: the message says which, `failed.error_id` finds the log lines


asyncio.run(main())
