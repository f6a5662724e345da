"""adversary28: three `echo … | klaw chat` at once: two exited 2 "leave it first (/exit or Ctrl-D in its
terminal)" while the holder was a piped chat with no terminal, ending in seconds. Now a piped chat waits
for another piped chat holding the home, says so on stderr, and every message is answered (decision 487).
Real processes, the fake OpenAI server; the first reply is held so the others must find the home held."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import CHAT_SECONDS, started_chat


async def test_three_piped_chats_at_once_are_all_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        asked, release = asyncio.Event(), asyncio.Event()

        async def held() -> None:
            asked.set()
            await release.wait()

        model.reply_text("Answer one.", before=held)  # whoever asks first waits until the others are running
        model.reply_text("Answer two.")
        model.reply_text("Answer three.")
        chats = [await started_chat(env, f"message {n}\n".encode()) for n in (1, 2, 3)]
        await asyncio.wait_for(asked.wait(), CHAT_SECONDS)  # one chat holds the home and asks the model
        await asyncio.sleep(3)  # the others find the home held meanwhile
        release.set()
        results = await asyncio.wait_for(asyncio.gather(*(c.communicate() for c in chats)), CHAT_SECONDS * 3)
    codes = [c.returncode for c in chats]
    outs = sorted(out.decode().strip() for out, _ in results)
    errs = [err.decode() for _, err in results]
    assert codes == [0, 0, 0], errs
    assert outs == ["Answer one.", "Answer three.", "Answer two."], (outs, errs)
    said = " ".join(" ".join(errs).split())
    assert "leave it first" not in said
    assert said.count("another piped klaw chat") >= 1 and "waiting for it to finish" in said, said
