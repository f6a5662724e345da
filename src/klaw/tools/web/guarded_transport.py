"""An httpx transport that connects only to addresses the `AddressPolicy` allows, and to exactly those.

Checking a URL's host name and then letting the HTTP library resolve it again leaves a gap: a DNS
answer that changes between the two (DNS rebinding) sends the request to an address never checked.
So resolution, the check and the connection happen in one place, httpcore's network backend: the
host name is resolved once, every address it resolves to is checked (one forbidden address refuses
the host: a name that points at both a public and a private address is not a public page), and the
socket is opened to the checked address itself. httpcore still gives TLS the host name (SNI and
certificate checks) and httpx still sends it as `Host`, so virtual hosting and HTTPS work as usual.
Every connection goes through here, redirects' included; a pooled connection was checked when opened.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable

import httpcore
import httpx

from klaw.tools.web.addresses import METADATA_REASON, AddressPolicy, IpAddress, parse_address
from klaw.tools.web.errors import AddressRefused, WebError

Resolver = Callable[[str, int], Awaitable[list[str]]]  # host, port → addresses, in the order to try


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the system resolver (getaddrinfo), as it orders them."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default backend behind a resolve → check → connect-to-that-address step."""

    def __init__(self, policy: AddressPolicy, resolver: Resolver = system_resolver) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.checked_addresses(host, port)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # checked_addresses never returns an empty list
        raise failure

    async def checked_addresses(self, host: str, port: int) -> list[IpAddress]:
        """Every address `host` resolves to, once each, all allowed; else AddressRefused naming why."""
        try:
            resolved = await self._resolver(host, port)
        except OSError:
            raise WebError(f"the host name {host!r} does not resolve (no such host, or no DNS)") from None
        addresses: list[IpAddress] = []
        for text in resolved:
            address = parse_address(text)
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise WebError(f"the host name {host!r} resolves to no address")
        for address in addresses:
            reason = self._policy.refusal(address)
            if reason is not None:
                shown = host if host == str(address) else f"{host} ({address})"
                # Never an invitation to allow-list a metadata service: it hands out the host's credentials,
                # and the model reading this may be following a page's orders (newcomer13).
                allow = (
                    ""
                    if reason == METADATA_REASON
                    else " (the person can allow it in engine.yaml, web.fetch.allowAddresses, then restart klaw)"
                )
                raise AddressRefused(f"{shown} is {reason}: web_fetch reaches public addresses only{allow}")
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("web_fetch does not open local sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport on a connection pool whose every connection goes through `GuardedBackend`.

    httpx builds its pool in `__init__` with no way to pass a network backend, so the pool is built
    again here with the same settings plus the backend. No proxy: a proxy would resolve the name
    itself, out of the guard's sight (the client is also made with `trust_env=False`).
    """

    def __init__(
        self, policy: AddressPolicy, ssl_context: ssl.SSLContext, resolver: Resolver = system_resolver
    ) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=10,
            max_keepalive_connections=5,
            network_backend=GuardedBackend(policy, resolver),
        )
