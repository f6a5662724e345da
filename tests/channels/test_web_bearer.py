"""A script talks to its agent through `klaw serve`'s web API with the token as a bearer key.

The real `klaw serve` (engine and gateway) on a home whose model is the fake OpenAI server in this
process; the `curl` command of docs/channels.md is run as written (its home and address replaced),
then httpx checks what a wrong or missing key gets: 401 before the body is read, 429 after a few
wrong ones from the same address, while the right key is never refused by that limit.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx

from klaw.channels.web.login_limit import FAILURES
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, running, serve_config, serve_env, stop, web_page, write_serve_home

DOCS = Path(__file__).resolve().parents[2] / "docs" / "channels.md"


def documented_curl(home: Path, url: str) -> str:
    """The first `curl` block under "From a script" in docs/channels.md, pointed at this home and server."""
    section = DOCS.read_text(encoding="utf-8").split("### From a script", 1)[1]
    command: str = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    return command.replace("~/.klaw", str(home)).replace("http://127.0.0.1:8765/", url)


async def test_one_curl_with_the_token_asks_the_agent_and_prints_its_reply() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as model:
            write_serve_home(home, serve_config(model.base_url))
            model.reply_text("Your list: buy oat milk.")
            async with running(env=serve_env(home), stderr=asyncio.subprocess.DEVNULL) as serve:
                url = await web_page(serve)
                curl = await asyncio.create_subprocess_exec(
                    "bash", "-c", documented_curl(home, url), stdout=asyncio.subprocess.PIPE
                )
                async with asyncio.timeout(STARTS_WITHIN + 120):  # the documented curl waits up to 120 s
                    out, _ = await curl.communicate()
                answer = json.loads(out)
                assert answer["queued"] is False
                assert answer["reply"]["kind"] == "reply" and answer["reply"]["text"] == "Your list: buy oat milk."
                asked = model.chat_requests[-1].body["messages"][-1]["content"]
                assert "what is on my list for today?" in str(asked)

                token = (home / "web_token").read_text(encoding="utf-8").strip()
                async with httpx.AsyncClient(base_url=url) as client:
                    keyed = {"Authorization": f"Bearer {token}"}
                    history = (await client.get("/api/history", headers=keyed)).json()["messages"]
                    assert [m["text"] for m in history][-2:] == [
                        "what is on my list for today?",
                        "Your list: buy oat milk.",
                    ]
                    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}):
                        refused = await client.post("/api/messages", json={"text": "hi"}, headers=headers)
                        assert refused.status_code == 401, headers
                    # Two messages sent at once are answered in one turn: each waiting call gets that reply
                    # (its `answers` names both), not only the one whose id the reply is filed under.
                    model.reply_text("Both noted.")
                    pair = await asyncio.gather(
                        *(
                            client.post(
                                "/api/messages?wait=120", json={"text": f"note {n}"}, headers=keyed, timeout=150
                            )
                            for n in (1, 2)
                        )
                    )
                    replies = [response.json()["reply"] for response in pair]
                    assert [r and r["text"] for r in replies] == ["Both noted.", "Both noted."]
                    sent_ids = sorted(response.json()["id"] for response in pair)
                    assert all(sorted(r["answers"]) == sent_ids for r in replies)
                    # a session-less browser request still needs its CSRF token; a bearer key needs none
                    assert (await client.get("/api/session", headers=keyed)).json()["csrf"] is None
                # a wrong key announcing a body that never comes: refused at once, the body never waited for
                host, port = url.removeprefix("http://").rstrip("/").split(":")
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(
                    f"POST /api/messages HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer nope\r\n"
                    "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n".encode()
                )
                async with asyncio.timeout(STARTS_WITHIN):  # a safety net: the old server waited for the body
                    assert (await reader.readline()).startswith(b"HTTP/1.1 401")
                writer.close()
                # another user of this machine (also 127.0.0.1) guessing keys: its guesses are soon
                # refused with 429, but the owner's right key still gets in
                async with httpx.AsyncClient(base_url=url) as neighbour, httpx.AsyncClient(base_url=url) as owner:
                    guesses = [
                        (await neighbour.get("/api/status", headers={"Authorization": f"Bearer guess{n}"})).status_code
                        for n in range(FAILURES + 1)
                    ]
                    assert guesses[-1] == 429 and set(guesses) == {401, 429}
                    limited = await neighbour.get("/api/status", headers={"Authorization": "Bearer guess"})
                    assert limited.status_code == 429 and "too many wrong tokens" in limited.json()["detail"]
                    assert (await owner.get("/api/status", headers=keyed)).status_code == 200
                    assert (await owner.get("/api/status", headers={"Authorization": "Bearer x"})).status_code == 429
                assert await stop(serve) == 0
