"""web_search through each provider, against local servers answering as the providers do: SearXNG's
JSON API (and its 403 when the JSON format is not enabled), Brave's and Tavily's APIs with their
keys. Results come back numbered, fenced as untrusted; a missing key or a refusal says what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.config import WebConfig, WebSearchConfig
from klaw.config_loader import ConfigError, load_config
from klaw.tools.registry import ToolRegistry
from klaw.tools.web.errors import WebError
from klaw.tools.web.readable import FENCE_CLOSE, FENCE_OPEN
from klaw.tools.web.search import WebSearch
from klaw.tools.web.tools import register_web_tools, search_unavailable
from tests.tools.web.pages import brave_routes, searxng_routes, serving, tavily_routes

FOUND = [
    {
        "title": "SearXNG  documentation",
        "url": "https://docs.searxng.org/",
        "content": "A privacy-respecting\nmetasearch engine.",
    },
    {"title": "No URL here", "content": "skipped"},
    {"title": "Source code", "url": "https://github.com/searxng/searxng", "content": "Repository."},
]


async def test_searxng_results_are_titles_urls_and_snippets() -> None:
    with serving(searxng_routes(FOUND)) as server:
        config = WebSearchConfig(provider="searxng", url=server.url(""))
        results = await WebSearch(config).search("  metasearch engine ")
    assert [(r.title, r.url, r.snippet) for r in results] == [
        ("SearXNG documentation", "https://docs.searxng.org/", "A privacy-respecting metasearch engine."),
        ("Source code", "https://github.com/searxng/searxng", "Repository."),
    ]
    assert server.requests[0].path == "/search?q=metasearch+engine&format=json"


async def test_the_tool_numbers_the_results_inside_the_untrusted_fence() -> None:
    with serving(searxng_routes(FOUND)) as server:
        registry = ToolRegistry()
        register_web_tools(
            registry, WebConfig(search=WebSearchConfig(provider="searxng", url=server.url(""), max_results=1))
        )
        assert registry.names == ("web_fetch", "web_search")
        from pathlib import Path

        from klaw.llm.messages import ToolCall
        from klaw.store.records import ChatRef
        from klaw.tools.schema import ToolContext

        result = await registry.execute(
            ToolCall("c1", "web_search", '{"query": "searxng"}'), ToolContext(ChatRef("console", "me"), Path("."))
        )
    assert not result.is_error
    assert result.content == (
        f"{FENCE_OPEN}\n1. SearXNG documentation — https://docs.searxng.org/\n"
        f"   A privacy-respecting metasearch engine.\n{FENCE_CLOSE}"
    )


async def test_searxng_without_its_json_format_enabled_says_how_to_fix_it() -> None:
    refused = pytest.raises(WebError, match=r"403.*add json to search\.formats in its settings\.yml")
    with serving(searxng_routes(FOUND, json_enabled=False)) as server, refused:
        await WebSearch(WebSearchConfig(provider="searxng", url=server.url(""))).search("x")


async def test_an_unreachable_provider_and_an_empty_query_are_refused() -> None:
    with serving({}) as server:
        port = server.port
    with pytest.raises(WebError, match="could not be reached: ConnectError") as unreachable:
        await WebSearch(WebSearchConfig(provider="searxng", url=f"http://127.0.0.1:{port}")).search("x")
    # The person reads where klaw looked and what to check; a password in the URL is never shown.
    assert f"at http://127.0.0.1:{port} could not be reached" in str(unreachable.value)
    assert "web.search.url in engine.yaml" in str(unreachable.value)
    with pytest.raises(WebError) as with_password:
        await WebSearch(WebSearchConfig(provider="searxng", url=f"http://me:hunter2@127.0.0.1:{port}/?key=k3y")).search(
            "x"
        )
    said = str(with_password.value)
    assert f"at http://127.0.0.1:{port} could not" in said and "hunter2" not in said and "k3y" not in said
    with pytest.raises(WebError, match="the query is empty"):
        await WebSearch(WebSearchConfig(provider="searxng", url=f"http://127.0.0.1:{port}")).search("  ")


async def test_brave_with_its_key_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    found = [{"title": "Brave", "url": "https://brave.com/", "description": "A browser."}]
    with serving(brave_routes(found, key="k-123")) as server:
        config = WebSearchConfig(provider="brave", url=server.url("/res/v1/web/search"), api_key_env="BRAVE_TEST_KEY")
        with pytest.raises(WebError, match="API key is missing: set the environment variable BRAVE_TEST_KEY"):
            await WebSearch(config).search("browser")
        monkeypatch.setenv("BRAVE_TEST_KEY", "wrong")
        with pytest.raises(WebError, match="answered 401") as refused:
            await WebSearch(config).search("browser")
        assert "wrong" not in str(refused.value)
        monkeypatch.setenv("BRAVE_TEST_KEY", "k-123")
        results = await WebSearch(config).search("browser")
    assert [(r.title, r.url, r.snippet) for r in results] == [("Brave", "https://brave.com/", "A browser.")]
    assert "count=5" in server.requests[-1].path


async def test_tavily_with_its_key_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    found = [{"title": "Tavily", "url": "https://tavily.com/", "content": "Search for agents."}]
    monkeypatch.setenv("TAVILY_TEST_KEY", "tvly-1")
    with serving(tavily_routes(found, key="tvly-1")) as server:
        config = WebSearchConfig(provider="tavily", url=server.url("/search"), api_key_env="TAVILY_TEST_KEY")
        results = await WebSearch(config).search("agents")
    assert [(r.title, r.url, r.snippet) for r in results] == [("Tavily", "https://tavily.com/", "Search for agents.")]


def test_search_config_says_what_is_missing(tmp_path: object) -> None:
    assert search_unavailable(WebConfig()) == "no search provider"
    path = Path(str(tmp_path)) / "engine.yaml"
    for yaml, says in [
        ("web:\n  search:\n    provider: searxng\n", "needs web.search.url"),
        ("web:\n  search:\n    provider: brave\n", "needs web.search.apiKeyEnv"),
        ("web:\n  search:\n    provider: brave\n    apiKeyEnv: BSA-secret-key-1\n", "name of an environment variable"),
        ("web:\n  fetch:\n    allowAddresses: [nas.local]\n", "not an IP address or network"),
    ]:
        path.write_text(yaml, encoding="utf-8")
        with pytest.raises(ConfigError, match=says):
            load_config(path, env={})
