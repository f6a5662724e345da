"""klaw's cap on one message from an MCP server, and the note that a server passed it.

One JSON-RPC message is one line of a command server's stdout (stdio_lines.py, decision 298) or one answer
of a URL server (http_answers.py, decision 309): a tool's result with an image or a file is a few MB of
base64 at most. Past the cap the reader stops, sets `Overflow`, and the link words why the connection
ended (never what the server sent) in the call's refusal, `/status` and the log, and restarts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MAX_MESSAGE_BYTES = 16 * 1024 * 1024

Kind = Literal["line", "answer", "coding", "unreadable"]


@dataclass
class Overflow:
    """Set by a reader when the server passed the cap, for the link to word the connection's end."""

    limit: int = MAX_MESSAGE_BYTES
    kind: Kind | None = None
    detail: str = ""  # "coding": klaw.unpacking's words (the coding refused, or the data corrupt); "unreadable": why

    @property
    def happened(self) -> bool:
        return self.kind is not None

    def words(self) -> str:
        """What the server did, after its name: "the MCP server 'x' <words>"."""
        cap = f"{self.limit // (1024 * 1024)} MB"
        if self.kind == "coding":
            # klaw.unpacking words it about the server: "it sent its answer in a compression klaw cannot
            # undo (br)", "its gzip data is corrupt (...)"
            detail = self.detail
            said = detail.removeprefix("it ") if detail.startswith("it ") else f"sent an answer: {detail}"
            return (
                f"{said}; klaw asks for answers uncompressed and undoes gzip and deflate only: turn the server's"
                " (or its proxy's) compression off, or to gzip"
            )
        if self.kind == "unreadable":
            return f"answered with a message klaw could not read ({self.detail})"
        if self.kind == "line":
            return f"wrote a line longer than {cap} (klaw's limit for one message)"
        # An answer of server-sent events counts its notifications too (decision 309 addendum).
        return f"sent an answer longer than {cap} (klaw's limit for one answer, its notifications included)"
