"""Which proxy, if any, a model or embedding server's base URL is reached through (decision 318).

The environment names proxies as curl, pip and urllib read them: `HTTPS_PROXY`, `HTTP_PROXY`,
`ALL_PROXY` (lower-case too, which wins) and `NO_PROXY`. A client serves one base URL
(`llm/http.new_http_client`), so the choice is made once, here, and httpx is handed the one proxy
that applies or none:

- a server on this machine (`localhost`, `*.localhost`, 127.0.0.0/8 however written, `::1`,
  `0.0.0.0`) is asked directly: a proxy runs elsewhere, and its `localhost` is not this machine's;
- `NO_PROXY` as urllib reads it (`corp.lan` and `.corp.lan` both cover the domain and its hosts,
  `*` covers every host), and address ranges (`10.0.0.0/8`) as curl reads them;
- a SOCKS proxy is used (klaw depends on `httpx[socks]`, decision 335); GNOME's `socks://`, which names
  no version, is asked as SOCKS5, the version GLib tries first (httpx refuses the bare scheme);
- a proxy httpx cannot use (`socks4://`, `ftp://`, a port out of range) is not used: one warning names
  the variable and the fix, and the server is asked directly, as klaw did before it read proxies. A
  setting a person did not make for klaw must not stop klaw from starting.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import os
import socket
import urllib.request
from dataclasses import dataclass

import httpx

from klaw.redaction import mask_url_credentials

log = logging.getLogger(__name__)

_USABLE_SCHEMES = ("http", "https")
_SOCKS_SCHEMES = ("socks5", "socks5h")
_SOCKS_ANY_VERSION = "socks://"  # GNOME's manual proxy setting exports all_proxy=socks://host:port/
_warned: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Proxy:
    """The proxy a base URL goes through: its URL as the environment gives it (it may hold a password,
    so it is never shown as is) and the variable that named it."""

    url: str
    variable: str

    def shown(self) -> str:
        return f"{self.variable}={mask_url_credentials(self.url)}"

    def for_httpx(self) -> str:
        """The URL httpx is handed: GNOME's `socks://` as `socks5://` (module docstring)."""
        if self.url[: len(_SOCKS_ANY_VERSION)].lower() == _SOCKS_ANY_VERSION:
            return "socks5://" + self.url[len(_SOCKS_ANY_VERSION) :]
        return self.url

    def hint(self) -> str:
        """What to check when a request through it failed: the proxy, not the model server's baseUrl."""
        return (
            f"klaw asked through the proxy {self.shown()}: check that the proxy runs and lets klaw through "
            "(HTTP 407: it wants a user and password in that URL, http://user:password@host:port), "
            "or put the server's host in NO_PROXY."
        )


def proxy_for(base_url: str) -> Proxy | None:
    """The proxy `base_url` is reached through, or None (no proxy named, this machine, NO_PROXY, or a
    proxy httpx cannot use: warned once)."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        return None  # the request itself says what is wrong with the URL
    host = url.host
    proxies = urllib.request.getproxies_environment()
    chosen = proxies.get(url.scheme) or proxies.get("all")
    if not chosen or not host or on_this_machine(host) or _bypassed(host, proxies.get("no", "")):
        return None
    proxy = Proxy(chosen, _variable(url.scheme, chosen))
    problem = unusable(proxy.for_httpx())
    if problem is None:
        return proxy
    if (proxy.variable, proxy.url) not in _warned:
        _warned.add((proxy.variable, proxy.url))
        log.warning(
            "%s is not a proxy klaw can use (%s); klaw asks %s directly. Name an http://, https:// or socks5://"
            " proxy, or put the host in NO_PROXY.",
            proxy.shown(),
            problem,
            host,
        )
    return None


def unusable(proxy_url: str) -> str | None:
    """Why httpx could not use this proxy URL, in words, or None if it can."""
    try:
        url = httpx.URL(proxy_url)
    except httpx.InvalidURL:
        return "it cannot be read as a URL"
    if url.scheme in _SOCKS_SCHEMES:
        if importlib.util.find_spec("socksio") is None:  # a dependency (decision 335): a broken install
            return "a SOCKS proxy needs the socksio package (pip install 'httpx[socks]')"
    elif url.scheme not in _USABLE_SCHEMES:
        return f"httpx knows no proxy scheme {url.scheme!r}"
    if not url.host:
        return "it names no host"
    if url.port is not None and not 0 < url.port < 65536:
        return "its port is not a number from 1 to 65535"
    return None


def on_this_machine(host: str) -> bool:
    """Whether `host` is this machine's loopback or unspecified address, however it is written
    (`localhost.`, `127.1`, `0x7f.1`, `[::1]`)."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(name))  # the short and hex forms connect() takes
        except OSError:
            return False
    return address.is_loopback or address.is_unspecified


def _variable(scheme: str, value: str) -> str:
    for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY"):
        if os.environ.get(name) == value:
            return name
    return f"{scheme.upper()}_PROXY"


def _bypassed(host: str, no_proxy: str) -> bool:
    """NO_PROXY as urllib reads it, plus address ranges (`10.0.0.0/8`), which it does not."""
    if not no_proxy:
        return False
    if urllib.request.proxy_bypass(host):  # NO_PROXY from the environment, as urllib reads it
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    for entry in no_proxy.split(","):
        if "/" in entry:
            try:
                if address in ipaddress.ip_network(entry.strip(), strict=False):
                    return True
            except ValueError:
                continue
    return False
