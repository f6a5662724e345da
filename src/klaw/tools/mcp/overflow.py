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

Kind = Literal["line", "answer", "compressed"]


@dataclass
class Overflow:
    """Set by a reader when the server passed the cap, for the link to word the connection's end."""

    limit: int = MAX_MESSAGE_BYTES
    kind: Kind | None = None

    @property
    def happened(self) -> bool:
        return self.kind is not None

    def words(self) -> str:
        """What the server did, after its name: "the MCP server 'x' <words>"."""
        cap = f"{self.limit // (1024 * 1024)} MB"
        if self.kind == "compressed":
            return (
                "sent a compressed answer though klaw asked for it uncompressed (klaw could not bound its"
                f" unpacked size, {cap} at most for one message)"
            )
        if self.kind == "line":
            return f"wrote a line longer than {cap} (klaw's limit for one message)"
        # An answer of server-sent events counts its notifications too (decision 309 addendum).
        return f"sent an answer longer than {cap} (klaw's limit for one answer, its notifications included)"
