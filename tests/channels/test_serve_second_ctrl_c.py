"""`klaw serve` stopped with a reply in flight: the first Ctrl-C says it finishes that reply and that a
second Ctrl-C quits at once, as `klaw chat` does; the second one does (it used to be ignored, the person
waiting up to the model's timeoutSeconds). The message whose reply was dropped is kept, and the next
`klaw serve` answers it: the history then holds the reply, asked through the web API with the token. The
log's warning says the turn was cancelled at the second Ctrl-C, not "after 60 s" (decision 450)."""

from __future__ import annotations

import asyncio
import signal

import httpx

from klaw.cli.stopping import AT_ONCE, FINISHING
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.serve_helpers import (
    STARTS_WITHIN,
    exit_status,
    read_until,
    running,
    serve_config,
    serve_env,
    stop,
    web_page,
    write_serve_home,
)

ASKED = "remember to buy oat milk"


async def test_a_second_ctrl_c_quits_at_once_and_the_message_is_answered_at_the_next_start() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as model:
            config = serve_config(model.base_url)
            config["models"]["fake/small"]["timeoutSeconds"] = 600
            write_serve_home(home, config)
            asked = asyncio.Event()

            async def think_for_ever() -> None:
                asked.set()
                await asyncio.Event().wait()

            model.reply_text("never sent", before=think_for_ever)
            async with running(env=serve_env(home)) as serve:
                url = await web_page(serve)
                keyed = {"Authorization": f"Bearer {(home / 'web_token').read_text(encoding='utf-8').strip()}"}
                async with httpx.AsyncClient(base_url=url, headers=keyed) as client:
                    sent = await client.post("/api/messages", json={"text": ASKED})
                    assert sent.status_code == 200, sent.text
                async with asyncio.timeout(STARTS_WITHIN):
                    await asked.wait()  # the reply is in flight
                serve.send_signal(signal.SIGINT)
                await read_until(serve.stderr, FINISHING)
                serve.send_signal(signal.SIGINT)
                await read_until(serve.stderr, " ".join(AT_ONCE.split()))
                said = await read_until(serve.stderr, "were cancelled")  # what happened, not "after 60 s" (450)
                assert "cancelled when told to quit at once (a second Ctrl-C)" in said, said
                assert "after 60 s" not in said
                assert await exit_status(serve) == 0
                assert not (home / "engine.sock").exists()

            model.reply_text("Noted: oat milk.")
            async with running(env=serve_env(home)) as serve:  # the kept message is answered now
                url = await web_page(serve)
                async with httpx.AsyncClient(base_url=url, headers=keyed) as client:
                    texts: list[str] = []
                    async with asyncio.timeout(STARTS_WITHIN):
                        while "Noted: oat milk." not in texts:
                            await asyncio.sleep(0.1)
                            texts = [m["text"] for m in (await client.get("/api/history")).json()["messages"]]
                    assert texts.count(ASKED) == 1
                    assert texts.index(ASKED) < texts.index("Noted: oat milk.")
                assert await stop(serve, signal.SIGINT) == 0
