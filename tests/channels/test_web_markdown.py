"""Replies' Markdown becomes HTML the page can show: formatting kept, nothing that could run survives."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from klaw.channels.web.markdown import render


class Elements(HTMLParser):
    """Every element and attribute a browser would build from the HTML (text stays text)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def test_formatting_and_code_blocks_render() -> None:
    html = render(
        "**bold** _it_ `x < 1`\n\n1. one\n2. two\n\n```python\nif a < b:\n    pass\n```\n\n"
        "| a | b |\n|---|--:|\n| 1 | 2 |"
    )
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html and "<code>x &lt; 1</code>" in html
    assert "<ol>" in html and "<li>two</li>" in html
    assert "<pre><code>if a &lt; b:\n    pass\n</code></pre>" in html
    assert "<table>" in html and "<td>2</td>" in html  # no style attribute: the CSP would refuse it


@pytest.mark.parametrize(
    "attack",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        '<a href="javascript:alert(1)">x</a>',
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "![x](https://tracker.example/pixel.png)",
        '<iframe src="https://evil.example"></iframe>',
        '<div onclick="alert(1)">hi</div>',
        "<svg onload=alert(1)>",
        '[x](https://ok.example "t" onmouseover=alert(1))',
    ],
)
def test_nothing_that_could_run_or_call_home_survives(attack: str) -> None:
    html = render(attack)
    for tag, attributes in Elements(html).found:
        assert tag in {"p", "a"}, (attack, html)  # no script, img, iframe, svg, div: at most a paragraph and a link
        assert not [name for name in attributes if name.startswith("on")], (attack, html)
        if tag == "a":
            assert (attributes.get("href") or "").startswith("https://"), (attack, html)  # a plain link at most


def test_links_open_apart_from_the_page() -> None:
    html = render("see [the docs](https://example.com/a?b=1&c=2) or <https://example.org>")
    assert '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow">' in html
    assert 'href="https://example.org"' in html


def test_an_image_is_its_alt_text_linked_without_the_bang() -> None:
    assert render("see ![a *chart*](https://example.com/c.png) here") == (
        '<p>see <a href="https://example.com/c.png" target="_blank" rel="noopener noreferrer nofollow">'
        "a chart</a> here</p>\n"
    )
    untitled = render("![](https://example.com/p.png)")  # no alt text: the address is the link's text
    assert ">https://example.com/p.png</a>" in untitled and "!" not in untitled
    nested = render("[![logo](https://example.com/l.png)](https://example.org)")  # links do not nest
    assert [tag for tag, _ in Elements(nested).found] == ["p", "a"] and ">logo</a>" in nested


def test_a_line_break_in_a_reply_is_kept_and_its_text_escaped() -> None:
    """newcomer10: a reply quoting a tool's output showed "exit code 0 after 0.11 s stdout: 45" on one line."""
    html = render("exit code 0 after 0.11 s\nstdout:\n<b>45</b>")
    assert html == "<p>exit code 0 after 0.11 s<br>\nstdout:<br>\n&lt;b&gt;45&lt;/b&gt;</p>\n", html


def test_a_tabulate_rule_line_in_a_reply_shows_as_sent() -> None:
    """lows19: a reply quoting tabulate's table lost its rule line `-  -` (read as an empty list in an empty
    list) and `------  -----` (read as a horizontal rule); a Markdown rule, a heading and a list stay."""
    assert render("a  b\n-  -\n1  2") == "<p>a  b<br>\n-  -<br>\n1  2</p>\n"
    assert render("-  -") == "<p>-  -</p>\n"
    assert render("Name    Age\n------  -----\nAlice   30") == "<p>Name    Age<br>\n------  -----<br>\nAlice   30</p>\n"
    assert render("> q\n> -  -") == "<blockquote>\n<p>q<br>\n-  -</p>\n</blockquote>\n"
    assert render("---") == "<hr>\n"
    assert render("Title\n---") == "<h2>Title</h2>\n"
    assert render("- one\n- two") == "<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n"
