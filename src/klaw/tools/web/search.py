"""`web_search`'s providers behind one small interface: a query in, titles, URLs and snippets out.

SearXNG is the first choice (self-hosted, no key, `GET /search?q=…&format=json`; its settings.yml
must list `json` under `search.formats`, else it answers 403). Brave (`GET` with an
`X-Subscription-Token` header) and Tavily (`POST` JSON with a bearer key) fit the same interface,
each a request and a mapping of its answer. The key is read from the environment variable engine.yaml
names, at call time, and never appears in a result or a log line. The provider's address is
configured by the person, so it is not behind web_fetch's address guard.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx

from klaw.config.web import WebSearchConfig
from klaw.llm.proxy import proxy_for
from klaw.redaction import mask_url_credentials
from klaw.tools.web.errors import WebError


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


class WebSearch:
    """Asks the configured provider; `search` gives its results or a WebError saying what failed."""

    def __init__(self, config: WebSearchConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if config.provider is None:
            raise ValueError("web search needs web.search.provider")
        self._config = config
        self._transport = transport  # tests: None = the network

    async def search(self, query: str) -> list[SearchResult]:
        query = query.strip()
        if not query:
            raise WebError("the query is empty: say what to search for")
        provider = self._config.provider
        try:
            async with self._client() as client:
                response = await self._ask(client, query)
        except httpx.TimeoutException:
            raise WebError(
                f"the {provider} search at {self._shown_endpoint()} did not answer within"
                f" {self._config.timeout_seconds:g} s (web.search.timeoutSeconds)"
            ) from None
        except httpx.HTTPError as exc:
            raise WebError(
                f"the {provider} search at {self._shown_endpoint()} could not be reached: {type(exc).__name__}"
                " (is it running, and is web.search.url in engine.yaml right?)"
            ) from None
        if response.status_code == 403 and provider == "searxng":
            raise WebError("SearXNG refused the JSON API (403): add json to search.formats in its settings.yml")
        if response.status_code >= 400:
            raise WebError(f"the {provider} search answered {response.status_code} {response.reason_phrase}")
        try:
            body = response.json()
        except ValueError:
            raise WebError(f"the {provider} search answered something other than JSON") from None
        return _results(provider, body)[: self._config.max_results]

    def _client(self) -> httpx.AsyncClient:
        """Through the proxy klaw's rules pick for the provider's address (`llm/proxy.py`, decisions 318 and
        335: one on this machine is asked directly, `socks://` is SOCKS5), not httpx's own reading of the
        environment, which sent a local SearXNG to HTTP_PROXY and raised on `socks://`."""
        proxy = None if self._transport is not None else proxy_for(self._config.endpoint() or "")
        return httpx.AsyncClient(
            timeout=self._config.timeout_seconds,
            transport=self._transport,
            proxy=None if proxy is None else proxy.for_httpx(),
            trust_env=False,
        )

    async def _ask(self, client: httpx.AsyncClient, query: str) -> httpx.Response:
        endpoint = self._config.endpoint() or ""
        count = self._config.max_results
        if self._config.provider == "searxng":
            return await client.get(f"{endpoint.rstrip('/')}/search", params={"q": query, "format": "json"})
        key = self._key()
        if self._config.provider == "brave":
            headers = {"X-Subscription-Token": key, "Accept": "application/json"}
            return await client.get(endpoint, params={"q": query, "count": count}, headers=headers)
        body = {"query": query, "max_results": count}
        return await client.post(endpoint, json=body, headers={"Authorization": f"Bearer {key}"})

    def _shown_endpoint(self) -> str:
        """The address asked, for an error: without the user, password or query a URL might carry a key in."""
        url = httpx.URL(self._config.endpoint() or "")
        return f"{url.scheme}://{url.netloc.decode()}{url.path}".rstrip("/")

    def _key(self) -> str:
        name = self._config.api_key_env or ""
        key = os.environ.get(name, "").strip()
        if not key:
            raise WebError(f"the {self._config.provider} API key is missing: set the environment variable {name}")
        return key


def _results(provider: str | None, body: Any) -> list[SearchResult]:
    """The provider's answer mapped to results; entries without a URL are skipped."""
    if not isinstance(body, dict):
        raise WebError(f"the {provider} search answered JSON of an unexpected shape")
    if provider == "brave":
        web = body.get("web")
        items, snippet_key = (web.get("results") if isinstance(web, dict) else None), "description"
    else:  # searxng and tavily both answer {"results": [{"title", "url", "content"}]}
        items, snippet_key = body.get("results"), "content"
    if not isinstance(items, list):
        raise WebError(f"the {provider} search answered JSON without a results list")
    results: list[SearchResult] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        results.append(SearchResult(_text(item.get("title")), item["url"], _text(item.get(snippet_key))))
    return results


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def describe_provider(config: WebSearchConfig) -> str:
    """The provider and where it is, for /status (credentials in the URL masked)."""
    return f"{config.provider} at {mask_url_credentials(config.endpoint() or '')}"
