"""`klaw chat` as a real process with its stdin piped, for the tests that drive it that way: run to its
end (`piped`, `piped_bytes`), or started and left running while the test looks at what it holds
(`started_chat`); and the one line a refusal prints (`refused`)."""

from __future__ import annotations

import asyncio
import sys

CHAT_SECONDS = 120  # a whole `klaw chat` run, start to exit, on a loaded machine


async def _chat_process(env: dict[str, str], *args: str, stdin_null: bool = False) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "klaw",
        "chat",
        *args,
        stdin=asyncio.subprocess.DEVNULL if stdin_null else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def piped_bytes(env: dict[str, str], data: bytes | None, *args: str) -> tuple[int, str, str]:
    """`klaw chat args…` with `data` on stdin (None: /dev/null), run to its end: exit status, stdout, stderr."""
    process = await _chat_process(env, *args, stdin_null=data is None)
    out, err = await asyncio.wait_for(process.communicate(data), timeout=CHAT_SECONDS)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def piped(env: dict[str, str], text: str) -> tuple[int, str, str]:
    """`echo text | klaw chat`, run to its end: exit status, stdout, stderr."""
    return await piped_bytes(env, text.encode())


async def started_chat(env: dict[str, str], data: bytes) -> asyncio.subprocess.Process:
    """`klaw chat` given `data` on stdin (then closed) and left running: the caller ends it with
    `communicate()`."""
    process = await _chat_process(env)
    assert process.stdin is not None
    process.stdin.write(data)
    process.stdin.close()
    return process


def refused(code: int, out: str, err: str) -> str:
    """The one line a refusal prints, checked for being one: exit 2, nothing on stdout, no traceback."""
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    said = " ".join(err.split())  # rich wraps a long line at the terminal's width
    assert said.startswith("error: ") and said.count("error:") == 1, err
    return said
