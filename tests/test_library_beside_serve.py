"""`Klaw(home)` while `klaw serve` runs on the home is refused, and the refusal says what a program can do
instead: ask the running engine over the web API's bearer route (docs/channels.md, "From a script"), or be
the home's engine with `listen=True`. Before, it said only "stop it first (…)". The test follows the advice."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from klaw import EngineAlreadyRunningError, Klaw
from klaw.llm.fake_server import FakeOpenAiServer
from tests.serve_helpers import running, serve_config, serve_env, stop, web_page, write_serve_home


async def test_a_program_refused_beside_klaw_serve_is_told_how_to_ask_it_instead(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        write_serve_home(home, serve_config(model.base_url))
        async with running(env=serve_env(home)) as serve:
            page = await web_page(serve)
            with pytest.raises(EngineAlreadyRunningError) as refused:
                await Klaw(home).start()
            message = str(refused.value)
            assert "klaw serve" in message and "stop it first" in message  # as before
            assert "/api/messages?wait=120" in message and str(home / "web_token") in message
            assert "Authorization: Bearer" in message and "Klaw(home, listen=True)" in message
            # the advice works: the running engine answers the program
            where = urlsplit(page)  # "web page: http://127.0.0.1:PORT/…" names the port the kernel picked
            token = (home / "web_token").read_text(encoding="utf-8").strip()
            async with httpx.AsyncClient(timeout=60) as client:
                answer = await client.post(
                    f"{where.scheme}://{where.netloc}/api/messages?wait=60",
                    json={"text": "hello from my program"},
                    headers={"Authorization": f"Bearer {token}"},
                )
            assert answer.status_code == 200, answer.text
            assert "hello from my program" in answer.json()["reply"]["text"]  # the fake model echoes
            assert await stop(serve) == 0


async def test_the_refusal_names_the_address_the_page_listens_on_not_the_configured_port(tmp_path: Path) -> None:
    """engine.yaml names one port (another person's klaw listens there), the service's environment sets
    another: the hint named engine.yaml's, so following it sent the token to the wrong server (newcomer20,
    decision 489). It names what the serving process wrote in KLAW_HOME/web_address."""
    home = tmp_path / "home"
    someone_else = socket.socket()
    someone_else.bind(("127.0.0.1", 0))
    someone_else.listen()
    taken = someone_else.getsockname()[1]
    async with FakeOpenAiServer() as model:
        write_serve_home(home, serve_config(model.base_url, channels={"web": {"port": taken}}))
        try:
            async with running(env=serve_env(home, KLAW__CHANNELS__WEB__PORT="0")) as serve:
                page = urlsplit(await web_page(serve))
                with pytest.raises(EngineAlreadyRunningError) as refused:
                    await Klaw(home).start()
                message = " ".join(str(refused.value).split())
                assert f"http://{page.netloc}/api/messages?wait=120" in message, message
                assert f":{taken}" not in message, message
                assert await stop(serve) == 0
        finally:
            someone_else.close()
