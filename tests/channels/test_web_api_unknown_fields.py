"""`POST /api/messages` with a field it does not take (newcomer24 item 9, decision 540): `{"text": "x", "chat":
"carol"}` was answered in web:main, the `chat` silently dropped, as if a script could post into another chat. It
is refused now with a 422 naming the field and saying where the API answers; nothing is stored. A real `klaw
serve` on a real home, the fake model server, the bearer route a script uses."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx

from klaw.llm.fake_server import FakeOpenAiServer
from tests.serve_helpers import running, serve_config, serve_env, stop, web_page, write_serve_home


async def test_an_unknown_field_is_refused_naming_it_and_nothing_is_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with FakeOpenAiServer() as model:
        write_serve_home(home, serve_config(model.base_url))
        async with running(env=serve_env(home)) as serve:
            where = urlsplit(await web_page(serve))
            token = (home / "web_token").read_text(encoding="utf-8").strip()
            url = f"{where.scheme}://{where.netloc}/api/messages?wait=60"
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(timeout=60) as client:
                refused = await client.post(url, json={"text": "for carol", "chat": "carol", "to": 1}, headers=headers)
                assert refused.status_code == 422, refused.text  # before: 200, answered in web:main
                detail = refused.json()["detail"]
                assert "chat: not a field of this API" in detail and "to: not a field of this API" in detail
                assert "answers in web:main" in detail and "for carol" not in detail
                answered = await client.post(url, json={"text": "hello"}, headers=headers)
                assert answered.status_code == 200, answered.text
            assert "hello" in answered.json()["reply"]["text"]
            sent = [
                m.get("content") for r in model.chat_requests for m in r.body["messages"] if m.get("role") == "user"
            ]
            assert not any("for carol" in str(text) for text in sent)  # the refused one never reached the model
            assert await stop(serve) == 0
