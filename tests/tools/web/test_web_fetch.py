"""web_fetch against a real HTTP server on 127.0.0.1: the guard allow-lists loopback only in these
tests' config (never by default). A page comes back as its main text, fenced as untrusted; redirects
are followed hop by hop and each hop is checked; what the guard forbids, what is too big, not text
or redirects too often is refused with a reason, never fetched."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from klaw.config import WebConfig, WebFetchConfig
from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext
from klaw.tools.web.errors import AddressRefused, WebError
from klaw.tools.web.fetch import WebFetcher
from klaw.tools.web.plain_html import too_big
from klaw.tools.web.readable import FENCE_CLOSE, FENCE_OPEN, readable_page
from klaw.tools.web.tools import register_web_tools
from tests.tools.web.pages import PageServer, page_routes, serving

LOOPBACK_ONLY = WebFetchConfig(allow_addresses=("127.0.0.1",), max_bytes=4096, max_redirects=3)


@pytest.fixture
def pages() -> Iterator[PageServer]:
    with serving(page_routes()) as server:
        yield server


async def read(url: str, config: WebFetchConfig = LOOPBACK_ONLY) -> str:
    return await readable_page(await WebFetcher(config).fetch(url), config.max_chars)


async def test_a_page_is_its_main_text_as_markdown_fenced_as_untrusted(pages: PageServer) -> None:
    text = await read(pages.url("/article"))
    assert f"URL: {pages.url('/article')}" in text
    assert "Title: The deploy moves" in text  # trafilatura prefers the article heading
    body = text.split(FENCE_OPEN, 1)[1]
    assert body.rstrip().endswith(FENCE_CLOSE)
    assert "The deploy moves to **friday night** because of the code freeze." in body
    assert "[the ops team](https://example.org/ops)" in body
    assert "- drain the queue" in body
    for boilerplate in ("tracking pixel", "Copyright 2026", "Log in", "<p>", "<script"):
        assert boilerplate not in body


async def test_plain_text_comes_as_it_is(pages: PageServer) -> None:
    text = await read(pages.url("/plain"))
    assert "Type: text/plain" in text
    assert "line one\nline two ünïcode" in text


async def test_a_redirect_chain_is_followed_hop_by_hop(pages: PageServer) -> None:
    page = await WebFetcher(LOOPBACK_ONLY).fetch(pages.url("/hop1"))
    assert page.url == pages.url("/article")
    assert page.redirects == (pages.url("/hop1"), pages.url("/hop2"), pages.url("/hop3"))
    assert [r.path for r in pages.requests] == ["/hop1", "/hop2", "/hop3", "/article"]
    text = await readable_page(page, 12_000)
    assert f"Redirected from: {pages.url('/hop1')} (3 redirect(s))" in text
    assert "friday night" in text


async def test_a_redirect_to_a_forbidden_address_is_refused_before_connecting(pages: PageServer) -> None:
    # 127.0.0.2 is loopback too, but only 127.0.0.1 is allow-listed: the hop is checked on its own.
    with pytest.raises(AddressRefused, match=r"127\.0\.0\.2 is loopback"):
        await WebFetcher(LOOPBACK_ONLY).fetch(pages.url("/to-other-loopback"))
    assert [r.path for r in pages.requests] == ["/to-other-loopback"]


async def test_a_redirect_to_another_scheme_is_refused(pages: PageServer) -> None:
    with pytest.raises(WebError, match=r"redirect to 'file:///etc/passwd' is not http or https"):
        await WebFetcher(LOOPBACK_ONLY).fetch(pages.url("/to-file"))


async def test_a_host_name_resolving_to_loopback_is_refused_without_the_allow_list(pages: PageServer) -> None:
    with pytest.raises(AddressRefused, match=r"localhost \((127\.0\.0\.1|::1)\) is loopback.*allowAddresses"):
        await WebFetcher(WebFetchConfig()).fetch(pages.url("/article", host="localhost"))
    with pytest.raises(AddressRefused, match=r"127\.0\.0\.1 is loopback"):
        await WebFetcher(WebFetchConfig()).fetch(pages.url("/article"))
    assert pages.requests == []
    allowed = WebFetchConfig(allow_addresses=("127.0.0.0/8", "::1"))
    assert "friday night" in await read(pages.url("/article", host="localhost"), allowed)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[fec0::1]/", r"fec0::1 is site-local"),  # Python 3.11 calls it global
        ("http://[64:ff9b::7f00:1]/", r"is loopback"),  # NAT64 of 127.0.0.1
        ("http://[2002:a00:1::1]/", r"is private"),  # 6to4 of 10.0.0.1
    ],
)
async def test_ipv6_forms_of_local_addresses_are_refused_before_connecting(url: str, says: str) -> None:
    with pytest.raises(AddressRefused, match=says):
        await WebFetcher(WebFetchConfig()).fetch(url)


async def test_the_connection_goes_to_the_address_checked_with_the_host_name_kept(pages: PageServer) -> None:
    # A name the system cannot resolve, answered by the test's resolver (DNS is the edge we script):
    # the request reaching the server proves the socket went to the checked address itself, and its
    # Host header that the name was kept for virtual hosting.
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    page = await WebFetcher(LOOPBACK_ONLY, resolver).fetch(pages.url("/article", host="rebind.test"))
    assert "friday night" in page.text
    assert asked == ["rebind.test"]  # resolved once, by the guard, not again by the HTTP library
    assert pages.requests[-1].host == f"rebind.test:{pages.port}"


async def test_too_many_redirects_are_refused(pages: PageServer) -> None:
    with pytest.raises(WebError, match=r"more than 3 redirects \(web\.fetch\.maxRedirects\)"):
        await WebFetcher(LOOPBACK_ONLY).fetch(pages.url("/loop"))
    assert len(pages.requests) == 4


@pytest.mark.parametrize(
    ("path", "ending"),
    [("/big-announced", r"the server announced [\d,]+ bytes"), ("/big-unannounced", "reading stopped there")],
)
async def test_a_body_over_the_size_limit_is_refused(pages: PageServer, path: str, ending: str) -> None:
    with pytest.raises(WebError, match=r"larger than 4,096 bytes \(web\.fetch\.maxBytes\): " + ending + "$"):
        await WebFetcher(LOOPBACK_ONLY).fetch(pages.url(path))


@pytest.mark.parametrize(
    ("path", "says"),
    [("/image.png", "is image/png, not a text page"), ("/untyped-binary", "sent binary data without a type")],
)
async def test_binary_responses_are_refused_with_their_type(pages: PageServer, path: str, says: str) -> None:
    with pytest.raises(WebError, match=says):
        await WebFetcher(LOOPBACK_ONLY).fetch(pages.url(path))


async def test_an_error_status_and_a_bad_url_are_refused_naming_them(pages: PageServer) -> None:
    with pytest.raises(WebError, match=r"answered 404 Not Found"):
        await WebFetcher(LOOPBACK_ONLY).fetch(pages.url("/missing"))
    for url, says in [("ftp://example.org/x", "not http or https"), ("http://", "names no host")]:
        with pytest.raises(WebError, match=says):
            await WebFetcher(LOOPBACK_ONLY).fetch(url)


async def test_a_page_cannot_close_the_untrusted_fence_itself(pages: PageServer) -> None:
    text = await read(pages.url("/fence-break"))
    assert text.count(FENCE_CLOSE) == 1 and text.rstrip().endswith(FENCE_CLOSE)
    assert text.count(FENCE_OPEN) == 1
    assert "You are now outside the page" in text.split(FENCE_OPEN, 1)[1]


async def test_long_text_is_cut_saying_how_much(pages: PageServer) -> None:
    config = LOOPBACK_ONLY.model_copy(update={"max_chars": 200})
    text = await read(pages.url("/injection"), config)
    assert "characters (web.fetch.maxChars)]" in text and "[… cut:" in text


async def test_the_tool_result_is_an_error_the_model_reads_and_the_log_has_no_traceback(
    pages: PageServer, caplog: pytest.LogCaptureFixture
) -> None:
    registry = ToolRegistry()
    register_web_tools(registry, WebConfig())
    assert registry.names == ("web_fetch",)  # no search provider: no web_search
    call = ToolCall("c1", "web_fetch", f'{{"url": "{pages.url("/article")}"}}')
    result = await registry.execute(call, ToolContext(ChatRef("console", "me"), Path(".")))
    assert result.is_error
    assert result.content.startswith("127.0.0.1 is loopback")
    assert "web.fetch.allowAddresses, then restart klaw" in result.content
    assert pages.requests == []
    assert not [r for r in caplog.records if r.name == "klaw.tools.calls"]  # a refusal, not a failure


async def test_a_big_page_is_measured_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review of session 56 (decision 528): decision 523's count of a page's elements ran on the event loop,
    ~90 ms of CPU for a 4.8 MB page of 600,000 `<p>word`, every chat's turn waiting meanwhile."""
    from klaw.tools.web import readable
    from klaw.tools.web.fetch import FetchedPage

    threads: list[threading.Thread] = []

    def measured(text: str) -> tuple[int, int] | None:
        threads.append(threading.current_thread())
        return too_big(text)

    monkeypatch.setattr(readable, "too_big", measured)
    html = "<html><body>" + "<p>word" * 30_000 + "</body></html>"
    page = FetchedPage("http://127.0.0.1/big", "text/html", html, len(html), ())
    text = await readable_page(page, 1_000)
    assert "Read without layout: the page has 30,002 elements" in text
    assert threads and threading.main_thread() not in threads
