"""The httpx client a model or embedding server's base URL is asked with: through the environment's proxy or
on asyncio's streams, with a cookie jar that reads only answers setting cookies, and URLs parsed once.
"""

from __future__ import annotations

import functools

import httpx

from klaw.llm.asyncio_transport import AsyncioTransport, tls_context
from klaw.llm.proxy import proxy_for


def new_http_client(base_url: str) -> httpx.AsyncClient:
    """An HTTP client for one base URL (timeouts per request: models sharing a server differ). Through the
    proxy the environment names for it (`llm/proxy.py`, decision 318) on httpx's transports, else on
    asyncio's streams (decision 220; a given transport turns env proxies off). Cookies: `CookiesWhenSet`."""
    proxy = proxy_for(base_url)
    if proxy is not None:
        client = httpx.AsyncClient(
            timeout=None, follow_redirects=False, verify=tls_context(), proxy=proxy.for_httpx(), trust_env=False
        )
    else:
        # No redirect is followed, so a client of an http:// base URL never speaks TLS: it loads no CA bundle.
        transport = AsyncioTransport(tls=not base_url.lower().startswith("http://"))
        client = httpx.AsyncClient(timeout=None, follow_redirects=False, transport=transport)
    # httpx offers no parameter for the jar's class (its `cookies` setter copies into a plain `Cookies`);
    # tests/llm/test_http_client_cookies.py fails if a newer httpx stops reading `_cookies`.
    client._cookies = CookiesWhenSet()
    return client


class CookiesWhenSet(httpx.Cookies):
    """httpx's cookies, reading an answer's only when it sets some. httpx hands every answer to
    `http.cookiejar`, which wraps the request and the answer in urllib's classes (parsing the URL
    again) before finding no `Set-Cookie` header: ~15 % of a model request's CPU (decision 288). The
    jar reads `Set-Cookie` and `Set-Cookie2` alone, so skipping an answer without either changes nothing."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


@functools.lru_cache(maxsize=64)
def parsed_url(url: str) -> httpx.URL:
    """`url` parsed once: httpx parses a string URL on every request (~11 % of a model request's CPU,
    decision 288) and takes an `httpx.URL` as it is. An invalid URL raises each time (nothing cached)."""
    return httpx.URL(url)
