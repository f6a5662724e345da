"""The turn bench's model in a process of its own, as a real model server is.

In the engine's process the fake OpenAI server (uvicorn, starlette, h11: pure Python) cost ~0.9 ms of
CPU a request on the engine's event loop and under its GIL, about a tenth of what a turn cost with 50
chats at once, so `klaw bench turn` measured the stand-in beside the engine. Ollama, llama.cpp or a
provider answer from another process or machine; so does this one: the child runs `FakeOpenAiServer`
with `summary_model.wire_reply` and answers two questions on its stdin, one a line: `count` (chat
requests served so far, for the background calls a turn causes) and `cpu` (its own CPU seconds, so
the bench can say what the stand-in cost apart from the engine). Closing its stdin stops it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from types import TracebackType

from klaw.bench.summary_model import wire_reply
from klaw.llm.fake_server import FakeOpenAiServer

_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0


class ModelProcess:
    """`async with ModelProcess() as model:` a zero-delay model at `model.base_url`, served by a child."""

    def __init__(self) -> None:
        self._child: asyncio.subprocess.Process | None = None
        self.base_url = ""

    async def __aenter__(self) -> ModelProcess:
        self._child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "klaw.bench.model_process",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(_START_TIMEOUT_S):  # not wait_for, which can drop a cancel (decision 428)
                line = await self._line()
            self.base_url = line.strip()
        except BaseException:
            await self._stop()
            raise
        if not self.base_url.startswith("http://"):
            await self._stop()
            raise RuntimeError("the bench's model process did not start (see its error above)")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    async def chat_requests(self) -> int:
        """Chat completion requests the model has answered so far."""
        return int(await self._ask("count"))

    async def cpu_seconds(self) -> float:
        """CPU time the model's process has used so far (all its threads)."""
        return float(await self._ask("cpu"))

    async def _ask(self, question: str) -> str:
        child = self._running()
        assert child.stdin is not None
        child.stdin.write(question.encode() + b"\n")
        await child.stdin.drain()
        return await self._line()

    async def _line(self) -> str:
        child = self._running()
        assert child.stdout is not None
        return (await child.stdout.readline()).decode()

    def _running(self) -> asyncio.subprocess.Process:
        if self._child is None:
            raise RuntimeError("the model process is not running; use `async with ModelProcess()`")
        return self._child

    async def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.stdin is not None:
            child.stdin.close()
        try:
            async with asyncio.timeout(_STOP_TIMEOUT_S):
                await child.wait()
        except TimeoutError:
            child.kill()
            await child.wait()


async def _serve() -> None:
    """The child: serve until stdin closes, answering `count` and `cpu` meanwhile."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with FakeOpenAiServer(default_reply=wire_reply) as server:
        print(server.base_url, flush=True)
        while line := await reader.readline():
            question = line.decode().strip()
            if question == "count":
                print(len(server.chat_requests), flush=True)
            elif question == "cpu":
                print(time.process_time(), flush=True)
            else:
                print("?", flush=True)


if __name__ == "__main__":
    asyncio.run(_serve())
