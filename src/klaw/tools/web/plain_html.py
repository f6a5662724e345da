"""A page's text without a parse tree, for pages too big for trafilatura to read at a bounded cost.

trafilatura's main-content search is quadratic in the page's elements: 30,000 take ~7 s of CPU,
60,000 ~22 s, and a 4.8 MB page of 600,000 `<p>word` took 52 s and ~1 GB, in a thread nothing can
stop (adversary31, decision 523). So a page with more than `MAX_ELEMENTS` elements (or `MAX_CHARS`
characters) is not given to it: its text is taken here by a few regular-expression passes, each
linear in the page (every pattern that opens a match ends it at the page's end if its closing never
comes, so no pass scans the rest of the page again for each unclosed tag). Comments and the contents
of script, style and the like are dropped, block tags become line breaks, other tags go, entities
are decoded. No main-content search and no Markdown: the result says so (`APPROXIMATE`).
"""

from __future__ import annotations

import html
import re

MAX_ELEMENTS = 20_000  # trafilatura stays within ~4 s of CPU and ~150 MB below this (decision 523)
MAX_CHARS = 2_000_000
APPROXIMATE = (
    "Read without layout: the page has {elements:,} elements and {chars:,} characters, more than klaw reads in"
    f" full ({MAX_ELEMENTS:,} elements, {MAX_CHARS:,} characters); its text is given as it stands, menus and"
    " footers included, without headings, links or tables marked."
)
_START_TAG = re.compile(r"<[A-Za-z]")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_RAW_TEXT = re.compile(r"<(script|style|noscript|template|svg|math)\b.*?(?:</\1\s*>|\Z)", re.S | re.I)
_BLOCK_TAG = re.compile(
    r"</?(?:p|div|br|hr|li|ul|ol|dl|dt|dd|h[1-6]|tr|table|section|article|header|footer|nav|aside|main|blockquote"
    r"|pre|form|fieldset|figure|figcaption|details|summary|address|title)\b[^>]*(?:>|\Z)",
    re.I,
)
_TAG = re.compile(r"<[/!?]?[A-Za-z][^>]*(?:>|\Z)")
_CELL = re.compile(r"</?t[dh]\b[^>]*(?:>|\Z)", re.I)
_TITLE = re.compile(r"<title\b[^>]*>(.{0,2000}?)</title\s*>", re.S | re.I)
_SPACES = re.compile(r"[^\S\n]+")
_LINE_EDGES = re.compile(r" ?\n ?")  # spaces are single by then
_BLANK_LINES = re.compile(r"\n\s*\n\s*(?:\n\s*)+")


def too_big(page: str) -> tuple[int, int] | None:
    """(elements, characters) when the page is past what trafilatura is given, else None."""
    elements = len(_START_TAG.findall(page)) if len(page) > MAX_ELEMENTS * 2 else 0
    if elements > MAX_ELEMENTS or len(page) > MAX_CHARS:
        return elements, len(page)
    return None


def plain_text(page: str) -> tuple[str | None, str]:
    """The page's title (its `<title>`, when it has one near the start) and its text, by linear passes."""
    title_match = _TITLE.search(page, 0, 200_000)
    title = html.unescape(title_match.group(1)).strip() if title_match else None
    text = _COMMENT.sub(" ", page)
    text = _RAW_TEXT.sub(" ", text)
    text = _BLOCK_TAG.sub("\n", text)
    text = _CELL.sub(" ", text)
    text = html.unescape(_TAG.sub("", text))
    text = _SPACES.sub(" ", text)
    text = _LINE_EDGES.sub("\n", text)  # not a list of its lines: 600,000 small strings for 600,000 paragraphs
    return title or None, _BLANK_LINES.sub("\n\n", text).strip()
