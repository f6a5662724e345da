"""web_search follows klaw's proxy rules (decisions 318, 335), as model calls do: a SearXNG on this machine
is asked directly whatever proxy the environment names, and GNOME's `all_proxy=socks://…` is no error. It
used httpx's own reading of the environment: `HTTP_PROXY` sent the local search to the proxy ("could not be
reached"), and `socks://` raised "Unknown scheme for proxy URL" past the tool's words."""

from __future__ import annotations

import pytest

from klaw.config import WebSearchConfig
from klaw.tools.web.search import WebSearch
from tests.cli.chat_terminal import closed_port
from tests.tools.web.pages import searxng_routes, serving

FOUND = [{"title": "Docs", "url": "https://docs.searxng.org/", "content": "Metasearch."}]


@pytest.mark.parametrize(
    ("variable", "proxy"),
    [("all_proxy", "socks://127.0.0.1:{port}/"), ("HTTP_PROXY", "http://127.0.0.1:{port}")],
)
async def test_a_searxng_on_this_machine_is_asked_directly(
    monkeypatch: pytest.MonkeyPatch, variable: str, proxy: str
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv(variable, proxy.format(port=closed_port()))  # nothing listens there
    with serving(searxng_routes(FOUND)) as server:
        results = await WebSearch(WebSearchConfig(provider="searxng", url=server.url(""))).search("docs")
    assert [r.url for r in results] == ["https://docs.searxng.org/"]
