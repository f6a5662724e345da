"""adversary31's findings in the web and file tools, in whole turns (decision 523): the model (the fake
OpenAI server) asks for the calls, the engine runs them against a real page server on 127.0.0.1.

1. A page of tens of thousands of elements took trafilatura seconds to minutes of CPU (52 s and 1 GB for
   600,000 `<p>word`) in a thread nothing stops; now such a page is read by linear passes, said in the result.
2. A wide `web.fetch.allowAddresses` entry let a cloud metadata address through; now only an entry naming
   it alone does, and the start's log and `klaw config check` warn of an entry holding one.
3. A file name the system cannot take came back in Python's words with a warning in the log; now it is
   refused naming the rule, and the log stays quiet."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from klaw.tools.web.plain_html import MAX_ELEMENTS
from klaw.tools.web.readable import FENCE_CLOSE, FENCE_OPEN
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.engine.harness import running_engine
from tests.tools.web.pages import Route, serving

LOOPBACK = {"fetch": {"allowAddresses": ["127.0.0.1"]}}
PARAGRAPHS = MAX_ELEMENTS + 5_000  # past the limit; trafilatura took ~3 s of CPU a page on main
BIG_PAGE = "<html><head><title>Many &amp; words</title></head><body>" + "<p>word" * PARAGRAPHS + "</body></html>"
WIDE = ["fd00::/8", "100.64.0.0/10", "169.254.0.0/16"]


def big_page_routes() -> dict[str, Route]:
    return {"/big": lambda h, _: h.answer(200, "text/html; charset=utf-8", BIG_PAGE.encode())}


async def test_four_fetches_of_a_page_too_big_for_trafilatura_read_it_without_layout(tmp_path: Path) -> None:
    with serving(big_page_routes()) as pages:
        async with running_engine(tmp_path, web=LOOPBACK) as h:
            h.server.reply_tool_calls([("web_fetch", {"url": pages.url("/big")})] * 4)
            h.server.reply_text("Lots of words.")
            assert (await h.turn("what do these pages say?")).text == "Lots of words."
            results = h.last_request_messages()[-4:]
    for result in results:
        assert result["role"] == "tool" and result["name"] == "web_fetch"
        said, fenced = result["content"].split(FENCE_OPEN, 1)
        assert f"Read without layout: the page has {PARAGRAPHS + 4:,} elements" in said, said
        assert "without headings, links or tables marked" in said
        assert fenced.startswith("\nTitle: Many & words\n") and "\nword\nword\nword\n" in fenced
        assert "characters (web.fetch.maxChars)]" in fenced and fenced.rstrip().endswith(FENCE_CLOSE)
    assert len(pages.requests) == 4


async def test_metadata_addresses_stay_refused_inside_wide_allowed_networks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    urls = ["http://[fd00:ec2::254]/latest/meta-data/", "http://100.100.100.200/latest/", "http://169.254.169.254/"]
    with caplog.at_level(logging.WARNING, logger="klaw.engine.assembly"):
        async with running_engine(tmp_path, web={"fetch": {"allowAddresses": WIDE, "timeoutSeconds": 3}}) as h:
            h.server.reply_tool_calls([("web_fetch", {"url": url}) for url in urls])
            h.server.reply_text("Those are refused.")
            assert (await h.turn("read the metadata")).text == "Those are refused."
            results = [m["content"] for m in h.last_request_messages()[-3:]]
    for url, result in zip(urls, results, strict=True):
        host = url.split("/")[2].strip("[]")
        assert result.startswith(f"{host} is a cloud metadata service: web_fetch reaches public addresses only")
        assert "allowAddresses" not in result  # never an invitation to open it
    logged = [r.getMessage() for r in caplog.records if r.name == "klaw.engine.assembly"]
    assert "web.fetch.allowAddresses entry fd00::/8 holds fd00:ec2::254 (a cloud metadata service)" in logged[0]
    assert "entry 100.64.0.0/10 holds 100.100.100.200" in logged[1]
    assert "entry 169.254.0.0/16 holds 169.254.169.254, 169.254.170.2" in logged[2]
    assert all("stays refused" in line for line in logged[:3]) and len(logged) == 3


def test_config_check_warns_of_an_entry_holding_a_metadata_address(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    yaml = home / "engine.yaml"
    made = yaml.read_text(encoding="utf-8")
    assert made.count("    allowAddresses: []") == 1  # as klaw init writes it
    yaml.write_text(made.replace("allowAddresses: []", "allowAddresses: [fd00::/8, 192.168.1.20, 169.254.169.254]"))
    checked = klaw_here(home, "config", "check")
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 0 and checked.stdout.endswith("engine.yaml: valid\n"), said
    assert "warning: web.fetch.allowAddresses entry fd00::/8 holds fd00:ec2::254 (a cloud metadata" in said
    assert "warning: web.fetch.allowAddresses names 169.254.169.254, a cloud metadata service: web_fetch may" in said
    assert "192.168.1.20" not in said
    yaml.write_text(made.replace("allowAddresses: []", "allowAddresses: [nas.local]"), encoding="utf-8")
    refused = klaw_here(home, "config", "check")
    words = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and "fd12:3456:789a::/48" in words and "fd00::/8" not in words, words


async def test_a_file_name_the_system_cannot_take_is_refused_naming_the_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    long = "x" * 300
    calls = [
        ("file_read", {"path": long}),
        ("file_write", {"path": f"notes/{long}", "content": "hi"}),
        ("file_list", {"path": f"{long}/"}),
        ("file_read", {"path": "notes\x00.md"}),
        ("file_write", {"path": "a\x00b", "content": "hi"}),
        ("file_read", {"path": "é" * 128}),  # 256 bytes in UTF-8, 128 characters
        ("file_read", {"path": "/".join(["d"] * 2100)}),
    ]
    with caplog.at_level(logging.WARNING):
        async with running_engine(tmp_path) as h:
            h.server.reply_tool_calls(calls)
            h.server.reply_text("Those names do not work.")
            assert (await h.turn("read and write some files")).text == "Those names do not work."
            results = [m["content"] for m in h.last_request_messages()[-len(calls) :]]
            assert not (h.home.workspace / "notes").exists()
    too_long = "a file or folder name may be at most 255 bytes (UTF-8): use a shorter name"
    for result in results[:3]:
        assert result.startswith("invalid arguments:") and "is 300 bytes long" in result and too_long in result
    for result in results[3:5]:
        assert "the path holds a NUL character (\\x00), which no file name may" in result, result
    assert "is 256 bytes long" in results[5] and too_long in results[5]
    assert "the path is 4,199 bytes long; a path may be at most 4,095 bytes" in results[6]
    assert not any("Errno" in r or "embedded null" in r for r in results), results
    assert [r.getMessage() for r in caplog.records if r.name.startswith("klaw.tools")] == []
