"""The `web:` section: what `web_fetch` may reach and how big a page may be, and the `web_search` provider."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import Literal

from pydantic import Field, field_validator, model_validator

from klaw.config.base import ApiKeyEnv, Section

SearchProviderName = Literal["searxng", "brave", "tavily"]
# The hosted providers' endpoints; `web.search.url` overrides them (a proxy, a test server).
HOSTED_SEARCH_URLS: dict[str, str] = {
    "brave": "https://api.search.brave.com/res/v1/web/search",
    "tavily": "https://api.tavily.com/search",
}


class WebFetchConfig(Section):
    """`web_fetch`: the address guard's exceptions and the limits of one fetch.

    The guard refuses loopback, private, link-local, multicast, reserved and cloud-metadata addresses
    (docs/web.md); `allowAddresses` lets some through, e.g. a NAS on the home network. Limits bound
    what one call costs: the download (after decompression), the time of the whole fetch with its
    redirects, the redirects followed, and the text handed to the model.
    """

    allow_addresses: tuple[str, ...] = Field(
        default=(),
        description="Addresses or networks web_fetch may reach despite the guard, e.g. 192.168.1.20 or 10.0.0.0/24.",
    )
    max_bytes: int = Field(default=5_000_000, ge=1024, description="Largest response body read, in bytes.")
    timeout_seconds: float = Field(default=20.0, gt=0, description="Time for the whole fetch, redirects included.")
    max_redirects: int = Field(default=5, ge=0, le=20)
    max_chars: int = Field(default=12_000, ge=200, description="Most characters of page text given to the model.")

    @field_validator("allow_addresses")
    @classmethod
    def _networks(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            try:
                ip_network(value, strict=False)
            except ValueError:
                raise ValueError(
                    f"{value!r} is not an IP address or network: write e.g. 192.168.1.20, 10.0.0.0/24 or"
                    " fd12:3456:789a::/48"
                    " (host names are not accepted: the guard checks the address a name resolves to)"
                ) from None
        return values

    def allowed_networks(self) -> tuple[IPv4Network | IPv6Network, ...]:
        return tuple(ip_network(value, strict=False) for value in self.allow_addresses)


class WebSearchConfig(Section):
    """`web_search`'s provider: SearXNG (self-hosted, its JSON API), Brave or Tavily (hosted, with a key).

    Without a provider the tool is not offered (and `/status` says why). The provider's address is the
    person's own choice, so it is not subject to web_fetch's address guard (a SearXNG on localhost works).
    """

    provider: SearchProviderName | None = Field(default=None, description="searxng, brave or tavily; null = off.")
    url: str | None = Field(
        default=None,
        description="SearXNG's base URL (e.g. http://localhost:8888); for brave/tavily only to override their API.",
    )
    api_key_env: ApiKeyEnv | None = Field(
        default=None, description="Environment variable holding the provider's API key (brave, tavily)."
    )
    max_results: int = Field(default=5, ge=1, le=20)
    timeout_seconds: float = Field(default=15.0, gt=0)

    @model_validator(mode="after")
    def _complete(self) -> WebSearchConfig:
        if self.provider == "searxng" and not self.url:
            raise ValueError("web.search.provider searxng needs web.search.url, e.g. http://localhost:8888")
        if self.provider in ("brave", "tavily") and not self.api_key_env:
            raise ValueError(
                f"web.search.provider {self.provider} needs web.search.apiKeyEnv: the name of the environment"
                " variable holding its API key"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"web.search.url must start with http:// or https://, not {self.url[:40]!r}")
        return self

    def endpoint(self) -> str | None:
        """Where the provider is asked: the configured URL, else the hosted provider's API."""
        if self.url:
            return self.url
        return HOSTED_SEARCH_URLS.get(self.provider or "")


class WebConfig(Section):
    """Reading the web: `fetch` (web_fetch, on by default) and `search` (web_search, off until configured)."""

    fetch: WebFetchConfig = WebFetchConfig()
    search: WebSearchConfig = WebSearchConfig()
