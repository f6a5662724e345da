"""A reply as `klaw chat` shows it in a terminal: rich's Markdown, with every link's target in sight.

rich draws `[text](url)` as `text` alone, the address kept in an OSC 8 hyperlink that many terminals
(tmux before 3.4, the Linux console, most SSH setups) never show: a person read "the backup recipe" and
could not tell where it led (lows23). Drawn with `hyperlinks=False`, a link reads `text (url)`; a link
whose text is its address already (`<https://…>`, a bare URL the model wrote as a link) reads once, not
as `url (url)` (decision 431). Raw HTML is text: `<b>` and `<<<end of …>>>` show as written (decision 463).
"""

from __future__ import annotations

import functools

from markdown_it import MarkdownIt
from rich.markdown import Markdown

from klaw.terminal_text import kept_line_breaks, visible

CODE_THEME = "stata-dark"
"""Pygments' theme for a reply's code blocks: a dark one with no yellow in it. rich's default, monokai, draws
strings pale yellow (256-colour 186), so a reply's `"╔═ klaw asks before a tool runs ═╗"` in a code block looked
like the approval box, whose colour is yellow alone (approval_mark.py; decision 543)."""


def reply_markdown(text: str) -> Markdown:
    """`text` (a model's reply, an approval question) as Markdown for a terminal: control characters shown
    (`visible`), line breaks kept (`kept_line_breaks`), links with their targets."""
    markdown = Markdown("", hyperlinks=False, code_theme=CODE_THEME)
    markdown.markup = kept_line_breaks(visible(text))
    markdown.parsed = _parser().parse(markdown.markup)  # rich's own parser, its HTML rules off
    for block in markdown.parsed:
        children = block.children or []
        keep = []
        index = 0
        while index < len(children):
            token = children[index]
            close = index + 2
            if (
                token.type == "link_open"
                and close < len(children)
                and children[index + 1].type == "text"
                and children[close].type == "link_close"
                and _same_address(children[index + 1].content, str(token.attrs.get("href", "")))
            ):
                keep.append(children[index + 1])  # its address alone, once
                index = close + 1
                continue
            keep.append(token)
            index += 1
        block.children = keep if block.children is not None else None
    return markdown


@functools.cache
def _parser() -> MarkdownIt:
    """rich's Markdown parser (CommonMark, strikethrough, tables) without raw HTML: rich draws none of it, so
    `<<<end of untrusted web content>>>`, web_fetch's end marker, read `<<>>` and a `<div>` line vanished
    (newcomer18). A terminal shows what a reply says in angle brackets as written, as the web page does."""
    return MarkdownIt().enable("strikethrough").enable("table").disable(["html_inline", "html_block"])


def _same_address(shown: str, href: str) -> bool:
    """Whether a link's text already says where it goes: its address, with or without `mailto:`."""
    return shown.strip() in (href, href.removeprefix("mailto:"))
