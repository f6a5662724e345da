"""A base URL whose scheme its port does not speak: `http://` to a TLS port, `https://` to a plain HTTP one.

Either failure reads like a server that is down ("closed the connection", "the TLS handshake failed",
a bare HTTP 400), and the start-up check then printed the Ollama set-up steps, when the fix is one word of
the base URL. So the start-up check (`preflight.py`) and a model call that failed (`http.py`) ask the port
itself: a TLS handshake for an `http://` URL, a plain request for an `https://` one; and an answer a TLS
port gives a plain request (nginx's and Go's HTTP 400) is known by its words. They say which scheme the
port speaks, with the URL to set.
"""

from __future__ import annotations

import asyncio
import ssl

import httpx

from klaw.llm.answer_cap import excerpt
from klaw.llm.asyncio_transport import AsyncioTransport
from klaw.llm.proxy import proxy_for
from klaw.redaction import mask_url_credentials

PROBE_SECONDS = 5.0
TLS_WORDS = "this port speaks TLS: use https://"
PLAIN_WORDS = "this port speaks plain HTTP: use http://"
TLS_ANSWERED = "it answered HTTP 400 with a TLS port's words to plain HTTP"
# What a TLS port answers a plain HTTP request with, lower-cased: nginx ("400 The plain HTTP request was sent
# to HTTPS port", its page's title and text), Go's net/http ("Client sent an HTTP request to an HTTPS server.",
# Caddy's too) and Apache ("You're speaking plain HTTP to an SSL-enabled server port.").
_TLS_PORT_ANSWERS = (
    "the plain http request was sent to https port",
    "client sent an http request to an https server",
    "speaking plain http to an ssl-enabled server port",
)


def tls_port_answer(status: int, body: bytes) -> bool:
    """Whether an answer is a TLS port's to a plain HTTP request: HTTP 400 with nginx's, Go's or Apache's words."""
    if status != 400:
        return False
    text = " ".join(body[:4096].decode("utf-8", "replace").lower().split())
    return any(words in text for words in _TLS_PORT_ANSWERS)


def with_scheme(base_url: str, scheme: str) -> str:
    """`base_url` with `scheme` instead of its own, on the same port (`http://host/v1` asked port 80: it
    becomes `https://host:80/v1`), a password in it masked: the URL to set."""
    url = httpx.URL(base_url)
    port = url.port or (80 if url.scheme == "http" else 443)
    return mask_url_credentials(str(url.copy_with(scheme=scheme, port=port)))


async def wrong_scheme(base_url: str, exc: httpx.HTTPError) -> str | None:
    """`TLS_WORDS` or `PLAIN_WORDS` when a request to `base_url` failed with `exc` because its port speaks
    the other scheme (asked of the port: `speaks_tls`, `speaks_plain_http`), else None. Only for a failure
    to connect or answer (a transport error), never a timeout (a silent port is not asked again), and not
    through a proxy (the port klaw reached is the proxy's)."""
    if not isinstance(exc, httpx.TransportError) or isinstance(exc, httpx.TimeoutException):
        return None
    if proxy_for(base_url) is not None:
        return None
    scheme = httpx.URL(base_url).scheme
    if scheme == "http" and await speaks_tls(base_url):
        return TLS_WORDS
    if scheme == "https" and await speaks_plain_http(base_url):
        return PLAIN_WORDS
    return None


async def speaks_tls(base_url: str) -> bool:
    """Whether the host and port of an http:// base URL answer a TLS handshake (an https server there:
    the plain request got no answer, or one klaw cannot read). Only the handshake is made, unverified since
    nothing is sent over it, and closed at once."""
    url = httpx.URL(base_url)
    if url.scheme != "http" or not url.host:
        return False
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # loads no CA bundle
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            _, writer = await asyncio.open_connection(url.host, url.port or 80, ssl=context, server_hostname=url.host)
    except (OSError, TimeoutError):  # ssl.SSLError is an OSError
        return False
    writer.close()
    return True


async def speaks_plain_http(base_url: str) -> bool:
    """Whether the host and port of an https:// base URL answer a plain HTTP request (an http server there:
    the TLS handshake failed). The request is a GET of the same URL with http://, straight to the port (no
    proxy); any answer but a TLS port's own (`tls_port_answer`: a TLS server whose handshake failed for
    another reason, an old TLS version) means plain HTTP."""
    url = httpx.URL(base_url)
    if url.scheme != "https" or not url.host:
        return False
    plain = url.copy_with(scheme="http", port=url.port or 443)
    try:
        async with (
            asyncio.timeout(PROBE_SECONDS),
            httpx.AsyncClient(transport=AsyncioTransport(tls=False), follow_redirects=False) as client,
            client.stream("GET", plain, timeout=PROBE_SECONDS) as answer,
        ):
            body = await excerpt(answer)  # its start is enough, whatever its length
    except (httpx.HTTPError, TimeoutError):
        return False
    return not tls_port_answer(answer.status_code, body)
