"""HTTPS through the guard: the socket goes to the address the guard checked, while TLS still gets the
host name, for SNI and for the certificate check, and the request its Host header. A self-signed
certificate for `tls.test` (made by openssl for the test) on a server on 127.0.0.1; the test's resolver
answers for the name (DNS is the edge we script). A name the certificate does not cover is refused."""

from __future__ import annotations

import shutil
import ssl
from pathlib import Path

import pytest

from klaw.config import WebFetchConfig
from klaw.tools.web.errors import WebError
from klaw.tools.web.fetch import WebFetcher
from tests.tls import self_signed
from tests.tools.web.pages import page_routes, serving_tls

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl (Debian package openssl) is missing")
LOOPBACK_ONLY = WebFetchConfig(allow_addresses=("127.0.0.1",))


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path, "tls.test")


async def to_loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


async def test_https_keeps_the_host_name_for_sni_the_certificate_and_host(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    trusted = ssl.create_default_context(cafile=str(cert))
    with serving_tls(page_routes(), cert, key) as (pages, server_names):
        url = f"https://tls.test:{pages.port}/article"
        page = await WebFetcher(LOOPBACK_ONLY, to_loopback, trusted).fetch(url)
        assert "friday night" in page.text and page.url == url
        assert server_names == ["tls.test"]
        assert pages.requests[-1].host == f"tls.test:{pages.port}"
        with pytest.raises(WebError, match=r"could not be fetched: ConnectError.*CERTIFICATE_VERIFY_FAILED"):
            await WebFetcher(LOOPBACK_ONLY, to_loopback, trusted).fetch(f"https://other.test:{pages.port}/article")
