"""A reply's Markdown as HTML that is safe to put into the page: rendered on the server, then sanitized.

Models answer in Markdown; shown raw, code blocks and lists were a wall of asterisks and backticks.
The gateway renders with markdown-it-py (CommonMark, plus tables and strikethrough) with raw HTML
off, so `<script>` in a reply stays text, and markdown-it refuses `javascript:`, `vbscript:`,
`file:` and `data:` links. Then nh3 (the Ammonia sanitizer) keeps only an allow-list of tags and
attributes, links only to http, https and mailto, opened in a new tab without referrer or opener.
Images are not loaded: an image in a reply could call home (and the page's Content-Security-Policy
would block it anyway), so `![alt](url)` shows as its alt text linked to the url, without the `!`.
Doing it here rather than in the browser needs no JavaScript library vendored into the page; the
CSP (no inline script) is the second wall.
"""

from __future__ import annotations

from collections.abc import Callable

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block import StateBlock, hr, list_block
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from klaw.terminal_text import RULE_LINE

TAGS = {
    *("p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li"),
    *("h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td"),
}
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}

_parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(["table", "strikethrough"])
"""`breaks`: a line break in a paragraph is kept, as `klaw chat` keeps it (terminal_text.kept_line_breaks):
a reply quoting a tool's output ("exit code 0 after 0.11 s\nstdout:\n45") showed on one line (newcomer10)."""


def _image_as_link(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An image as its alt text, linked to where it lives (plain text inside a link: links do not nest)."""
    image = tokens[idx]
    alt = escapeHtml(self.renderInlineAsText(image.children or [], options, env))
    source = str(image.attrs.get("src", ""))
    inside_link = sum(token.nesting for token in tokens[:idx] if token.type in {"link_open", "link_close"}) > 0
    if inside_link or not source:
        return alt
    title = image.attrs.get("title")
    title_attribute = f' title="{escapeHtml(str(title))}"' if title else ""
    return f'<a href="{escapeHtml(source)}"{title_attribute}>{alt or escapeHtml(source)}</a>'


_parser.add_render_rule("image", _image_as_link)

_BlockRule = Callable[[StateBlock, int, int, bool], bool]


def _not_on_a_rule_line(rule: _BlockRule) -> _BlockRule:
    """Markdown's `rule` (the list or the horizontal rule) passing over a tabulate rule line (`RULE_LINE`), which
    is then read as text (a line of its paragraph, kept by `breaks`), shown as sent."""

    def checked(state: StateBlock, start: int, end: int, silent: bool) -> bool:
        line = state.src[state.bMarks[start] + state.tShift[start] : state.eMarks[start]]
        return False if RULE_LINE.fullmatch(line) else rule(state, start, end, silent)

    return checked


# markdown-it-py's own `alt` lists for these two rules (parser_block._rules), given again as `at` wants them
_parser.block.ruler.at("hr", _not_on_a_rule_line(hr), {"alt": ["paragraph", "reference", "blockquote", "list"]})
_parser.block.ruler.at("list", _not_on_a_rule_line(list_block), {"alt": ["paragraph", "reference", "blockquote"]})

_literal = MarkdownIt("zero", {"html": False, "breaks": True}).enable(["fence", "newline"])
"""Nothing read as Markdown but code blocks: every other character shows as written (no emphasis, no
backslash escapes, no entities), each line break kept."""


def render(text: str) -> str:
    """The sanitized HTML of `text` read as Markdown."""
    return _clean(_parser.render(text))


def render_literal(text: str) -> str:
    """The sanitized HTML of `text` as written, its fenced code blocks shown as code blocks without their
    fence lines: a tool approval's question (engine/approval.py), whose arguments sit in a fence that
    `klaw chat` and Telegram show as a code block, where plain text showed the ``` lines (decision 314)."""
    return _clean(_literal.render(text))


def _clean(html: str) -> str:
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
