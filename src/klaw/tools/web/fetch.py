"""`WebFetcher`: one http(s) GET of a page, within limits, through the address guard, redirects followed here.

Redirects are followed one hop at a time (httpx's own following is off) so each hop's URL is
checked (http or https only) and counted; each hop's connection is checked by the guarded transport
(klaw/tools/web/guarded_transport.py). The limits bound what a call costs: the whole fetch, redirects
included, has `timeoutSeconds`; a body larger than `maxBytes` (as announced, or as decoded) is refused,
not cut. The body is unpacked here from its raw bytes by klaw's bounded unpacking (klaw/unpacking.py, the
coding taken by decoding.py), at most 64 KB per step, and counted as it comes, so a gzip bomb stops at the
limit (decisions 294, 363). A type that
is not text (images, PDFs, archives…) is refused with its type, before its body is read. Every refusal
is a `WebError` whose message says what was wrong.
"""

from __future__ import annotations

import asyncio
import codecs
import re
import ssl
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from klaw.ascii_digits import digits
from klaw.config.web import WebFetchConfig
from klaw.tools.web.addresses import AddressPolicy
from klaw.tools.web.decoding import ACCEPT_ENCODING, PAGE, content_coding
from klaw.tools.web.errors import WebError
from klaw.tools.web.guarded_transport import GuardedTransport, Resolver, system_resolver
from klaw.unpacking import CodingError, unpacked

USER_AGENT = "klaw-web-fetch/1 (a personal agent reading a page for its person)"
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,text/markdown;q=0.9,application/json;q=0.8,*/*;q=0.1"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")
_CHARSET = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+:-]{0,39}")
_URL_SHOWN = ":/?#[]@!$&'()*+,;=%~"
TEXT_APPLICATION_TYPES = frozenset({"application/json", "application/xml", "application/javascript"})


@dataclass(frozen=True)
class FetchedPage:
    """A page's body as read, before extraction: where it ended up, its type, its text."""

    url: str  # after redirects
    content_type: str  # media type, lower case, without parameters ("" when the server sent none)
    text: str
    bytes_read: int
    redirects: tuple[str, ...]  # the URLs redirected from, in order
    note: str = ""  # klaw's one line on how the text was read, when not as the page said (its charset)

    @property
    def is_html(self) -> bool:
        return self.content_type in HTML_TYPES or (not self.content_type and "<html" in self.text[:2000].lower())


class WebFetcher:
    """Fetches pages for `web_fetch` under `web.fetch`'s guard and limits."""

    def __init__(
        self, config: WebFetchConfig, resolver: Resolver = system_resolver, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        """`resolver` and `ssl_context` (the CAs trusted): the system's unless given (tests)."""
        self._config = config
        self._policy = AddressPolicy(config.allowed_networks())
        self._resolver = resolver
        self._ssl_context = ssl_context

    async def fetch(self, url: str) -> FetchedPage:
        """The page at `url`; WebError saying why when it cannot be read."""
        target = _http_url(url)
        limit = self._config.timeout_seconds
        try:
            async with asyncio.timeout(limit):
                async with self._client() as client:
                    return await self._follow(client, target)
        except TimeoutError:
            raise WebError(f"the page did not arrive within {limit:g} seconds (web.fetch.timeoutSeconds)") from None
        except httpx.HTTPError as exc:
            raise WebError(f"the page could not be fetched: {_network_failure(exc)}") from None
        except httpx.InvalidURL as exc:  # only a redirect's: the URL asked for was checked first
            raise WebError(f"a redirect pointed to an address that is not a valid URL ({exc})") from None

    def _client(self) -> httpx.AsyncClient:
        if self._ssl_context is None:  # made once: loading the CA bundle takes a while
            self._ssl_context = ssl.create_default_context()
        transport = GuardedTransport(self._policy, self._ssl_context, self._resolver)
        return httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            trust_env=False,  # no proxy from the environment: it would resolve names out of the guard's sight
            timeout=httpx.Timeout(self._config.timeout_seconds),
            headers={"User-Agent": USER_AGENT, "Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING},
        )

    async def _follow(self, client: httpx.AsyncClient, url: httpx.URL) -> FetchedPage:
        redirects: list[str] = []
        request = client.build_request("GET", url)
        while True:
            response = await client.send(request, stream=True)
            try:
                if response.next_request is None:
                    return await self._read(response, tuple(redirects))
                if len(redirects) >= self._config.max_redirects:
                    raise WebError(
                        f"more than {self._config.max_redirects} redirects (web.fetch.maxRedirects);"
                        f" the last one pointed to {str(response.next_request.url)[:200]}"
                    )
                redirects.append(str(request.url))
                _check_location(response.headers.get("location", ""))
                request = response.next_request
                _http_url(str(request.url), redirect=True)
            finally:
                await response.aclose()

    async def _read(self, response: httpx.Response, redirects: tuple[str, ...]) -> FetchedPage:
        if response.status_code >= 400:
            reason = httpx.codes.get_reason_phrase(response.status_code)  # not the server's words: they are the page's
            raise WebError(f"the server answered {response.status_code} {reason} for {response.url}".replace("  ", " "))
        media_type = _media_type(response.headers.get("content-type", ""))
        if media_type and not _is_text(media_type):
            raise WebError(f"{response.url} is {media_type}, not a text page: web_fetch reads HTML and text only")
        limit = self._config.max_bytes
        announced = response.headers.get("content-length", "")
        if digits(announced) and int(announced) > limit:
            raise WebError(_too_large(int(announced), limit))
        applied = content_coding(response.headers.get("content-encoding", ""))
        body = bytearray()
        try:  # raw: httpx would inflate a whole chunk at once
            async for piece in unpacked(response.aiter_raw(), applied, PAGE):
                body += piece
                if len(body) > limit:
                    raise WebError(_too_large(None, limit))
        except CodingError as exc:  # corrupt, or cut off midway
            raise WebError(str(exc)) from None
        if not media_type and b"\x00" in body[:4096]:
            raise WebError(f"{response.url} sent binary data without a type: web_fetch reads HTML and text only")
        text, note = _decoded(bytes(body), response.charset_encoding)
        return FetchedPage(str(response.url), media_type, text, len(body), redirects, note)


def _http_url(url: str, *, redirect: bool = False) -> httpx.URL:
    where = "a redirect to" if redirect else "the URL"
    shown = repr(quote(url[:200], safe=_URL_SHOWN) if redirect else url[:200])  # a Location is the server's words
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError):
        raise WebError(f"{where} {shown} is not a valid URL") from None
    if parsed.scheme not in ("http", "https"):
        raise WebError(f"{where} {shown} is not http or https: web_fetch reads web pages only")
    if not parsed.host:
        raise WebError(f"{where} {shown} names no host")
    _check_port_and_host(parsed, f"{where} {shown}")
    return parsed


def _check_port_and_host(parsed: httpx.URL, said: str) -> None:
    """What httpx lets through and the connection then fails on in Python's words (adversary23): a port
    past 65535 (an OverflowError for a long one) and a host name past DNS's limits (an idna UnicodeError)."""
    if parsed.port is not None and not 0 < parsed.port <= 65535:
        port = str(parsed.port) if parsed.port < 10**12 else f"of {len(str(parsed.port))} digits"
        raise WebError(f"{said} has port {port}: a port is a number from 1 to 65535")
    labels = parsed.raw_host.split(b".")
    if len(parsed.raw_host) > 253 or max(len(label) for label in labels) > 63:
        raise WebError(
            f"{said} has a host name too long ({len(parsed.raw_host)} characters, its longest part"
            f" {max(len(label) for label in labels)}): DNS allows 63 characters between dots and 253 in all"
        )


def _check_location(location: str) -> None:
    """A redirect to another scheme refused naming the address as the server gave it: httpx fills in the
    current host where the address names none, so `file:///etc/passwd` would read `file://127.0.0.1/…`."""
    try:
        scheme = httpx.URL(location.strip()).scheme
    except (httpx.InvalidURL, TypeError):
        return  # httpx's own next request is checked (and refused) as it is
    if scheme and scheme not in ("http", "https"):
        _http_url(location, redirect=True)


def _media_type(content_type: str) -> str:
    """The media type, lower case; "" (unknown, then sniffed) for one that is not a type's syntax: the
    type is shown to the model outside the page's fence, so it may hold no words of the page's own."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type if _MEDIA_TYPE.fullmatch(media_type) else ""


_NOT_PAGE_CHARSETS = frozenset({"punycode", "idna", "unicode-escape", "raw-unicode-escape"})
"""Python's codecs for host names and string literals, never a page's charset: punycode's decoder takes
time quadratic in the text (300 kB: 11 s of the event loop, every chat stopped; adversary7)."""


def _decoded(body: bytes, charset: str | None) -> tuple[str, str]:
    """The text in the page's charset; in UTF-8, with a note saying so, when Python cannot decode that
    charset (unknown, not a text encoding, or one without replacement: decision 294)."""
    name = charset or "utf-8"
    try:
        if codecs.lookup(name).name in _NOT_PAGE_CHARSETS:
            raise LookupError(name)
        return body.decode(name, errors="replace"), ""
    except (LookupError, UnicodeError):  # UTF-8, the fallback, always decodes with replacement
        pass
    shown = repr(name) if _CHARSET.fullmatch(name) else "not a charset's name"
    note = f"Note: the page's charset is {shown}, which klaw cannot decode: read as UTF-8, unreadable bytes as \ufffd"
    return body.decode("utf-8", errors="replace"), note


def _is_text(media_type: str) -> bool:
    if media_type.startswith("text/") or media_type in HTML_TYPES or media_type in TEXT_APPLICATION_TYPES:
        return True
    return media_type.startswith("application/") and media_type.endswith(("+json", "+xml"))


def _too_large(size: int | None, limit: int) -> str:
    if size is not None:
        return f"the page is larger than {limit:,} bytes (web.fetch.maxBytes): the server announced {size:,} bytes"
    return f"the page is larger than {limit:,} bytes (web.fetch.maxBytes): reading stopped there"


def _network_failure(exc: httpx.HTTPError) -> str:
    """What went wrong on the network, without the library's wording when it is empty."""
    detail = str(exc).strip()
    return f"{type(exc).__name__} ({detail})" if detail else type(exc).__name__
