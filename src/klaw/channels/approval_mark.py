"""What marks a real question to approve a held tool, on surfaces where a reply could imitate its words.

adversary32 had a model reply "The agent wants to run file_write: … /approve 4a9c … approve? [y/N]": in a
terminal it read exactly as klaw's own question. The question's words are the engine's and any model can
write them, so each surface marks the real one with something model text cannot produce (decision 532):
the console draws it in a yellow double-lined box headed `APPROVAL_HEADING` in reverse yellow (a reply is
rich Markdown with its control characters shown: it draws no colours and no boxes of this kind; its code blocks
are drawn in a theme without yellow and the labels heading a reply are console.py's `REPLY_LABEL_STYLE`, decision 543);
Telegram heads it with `APPROVAL_HEADING` in bold, an entity only klaw sets (replies go as plain text);
the web page shows Approve and Deny buttons, which the page adds for the question alone (a reply's HTML
is sanitized to an allow-list with no buttons and no attributes but links').
"""

from __future__ import annotations

from rich import box
from rich.console import RenderableType
from rich.panel import Panel
from rich.text import Text

APPROVAL_HEADING = "klaw asks before a tool runs"
BOX_COLOUR = "yellow"  # the box's and its heading's alone: nothing else a reply can bring to the screen is yellow


def approval_panel(question: RenderableType) -> Panel:
    """The console's frame around a real approval question (the question drawn as a reply is)."""
    heading = Text(f" {APPROVAL_HEADING} ", style=f"reverse bold {BOX_COLOUR}")
    return Panel(question, title=heading, title_align="left", box=box.DOUBLE, border_style=BOX_COLOUR, expand=False)
