"""The web tools in whole turns: the model (the fake OpenAI server, over HTTP) calls web_fetch and
web_search, the engine runs them against local servers (a page server, a fake SearXNG), and the next
request carries the page's text fenced as untrusted. Loopback is allow-listed in these engines' config
only. Without a search provider web_search is not offered, and /status says why."""

from __future__ import annotations

from pathlib import Path

from klaw import Klaw, ManualClock
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.tools.web.readable import FENCE_CLOSE, FENCE_OPEN
from tests.engine.harness import CHAT, running_engine
from tests.tools.web.pages import page_routes, searxng_routes, serving

LOOPBACK = {"fetch": {"allowAddresses": ["127.0.0.1"]}}


def offered(body: object) -> list[str]:
    assert isinstance(body, dict)
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def test_a_turn_fetches_a_page_and_the_model_reads_its_fenced_text(tmp_path: Path) -> None:
    with serving(page_routes()) as pages:
        async with running_engine(tmp_path, web=LOOPBACK) as h:
            h.server.reply_tool_calls([("web_fetch", {"url": pages.url("/hop1")})])
            h.server.reply_text("The deploy is on friday night.")
            assert (await h.turn("when is the deploy? see my notes page")).text == "The deploy is on friday night."
            first = h.server.chat_requests[0]
            assert "web_fetch" in offered(first.body) and "web_search" not in offered(first.body)
            result = h.last_request_messages()[-1]
            assert result["role"] == "tool" and result["name"] == "web_fetch"
            assert f"URL: {pages.url('/article')}" in result["content"]
            fenced = result["content"].split(FENCE_OPEN, 1)[1]
            assert "**friday night**" in fenced and fenced.rstrip().endswith(FENCE_CLOSE)
            status = await h.engine.commands.handle(CHAT, "status", "")
    assert "Not offered: web_search: no search provider; fix: set web.search in engine.yaml" in status
    assert [r.path for r in pages.requests] == ["/hop1", "/hop2", "/hop3", "/article"]


async def test_without_the_allow_list_the_turn_gets_the_refusal_and_nothing_is_fetched(tmp_path: Path) -> None:
    with serving(page_routes()) as pages:
        async with running_engine(tmp_path) as h:
            h.server.reply_tool_calls([("web_fetch", {"url": pages.url("/article", host="localhost")})])
            h.server.reply_text("I cannot reach that address.")
            assert (await h.turn("read http://localhost/")).text == "I cannot reach that address."
            result = h.last_request_messages()[-1]
    assert "is loopback (this machine): web_fetch reaches public addresses only" in result["content"]
    assert pages.requests == []


async def test_a_turn_searches_through_searxng(tmp_path: Path) -> None:
    found = [{"title": "Lisbon weather", "url": "https://weather.example/lisbon", "content": "Sunny, 21 °C."}]
    with serving(searxng_routes(found)) as searxng:
        search = {"search": {"provider": "searxng", "url": searxng.url("")}}
        async with running_engine(tmp_path, web=search) as h:
            h.server.reply_tool_calls([("web_search", {"query": "lisbon weather"})])
            h.server.reply_text("Sunny.")
            assert (await h.turn("weather in lisbon?")).text == "Sunny."
            assert {"web_fetch", "web_search"} <= set(offered(h.server.chat_requests[0].body))
            result = h.last_request_messages()[-1]["content"]
            status = await h.engine.commands.handle(CHAT, "status", "")
    assert "1. Lisbon weather — https://weather.example/lisbon\n   Sunny, 21 °C." in result
    assert result.startswith(FENCE_OPEN)
    assert "Not offered: web_search" not in status


async def test_the_library_api_fetches_a_page_in_a_turn(tmp_path: Path) -> None:
    with serving(page_routes()) as pages:
        async with FakeOpenAiServer() as server:
            config = {
                "models": {"fake/m": {"baseUrl": server.base_url, "contextBudget": 8000, "maxRetries": 0}},
                "routing": {"default": "fake/m"},
                "embedder": {"backend": "fake", "dim": 32},
                "summarizer": {"enabled": False},
                "web": LOOPBACK,
            }
            server.reply_tool_calls([("web_fetch", {"url": pages.url("/plain")})])
            server.reply_text("It has two lines.")
            async with Klaw(tmp_path / "home", config=config, clock=ManualClock()) as agent:
                assert await agent.ask("alice", "what does the page say?") == "It has two lines."
            body = server.chat_requests[-1].body
    assert isinstance(body, dict)
    assert "line two ünïcode" in body["messages"][-1]["content"]
