"""An MCP tool's answer as the text the model reads, and a failure as a sentence.

Text blocks are the answer; structured content stands in when a server sends no text; an image,
audio or binary resource is named with its type and size but not sent: klaw speaks the chat-completions
protocol, where a tool's result is text, and has no image path (docs/mcp.md, decision 514). A failure is
described by its innermost exception (the SDK's task groups wrap them), URL credentials masked, clipped:
it reaches /status, the log and the model.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from klaw.redaction import mask_url_credentials

REASON_CHARS = 200


def result_text(result: CallToolResult) -> str:
    """What the model reads of a call's result."""
    parts = [_block(block) for block in result.content]
    if not any(isinstance(block, TextContent) for block in result.content) and result.structured_content is not None:
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) if parts else "(the tool returned nothing)"


def _block(block: Any) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type} {block.mime_type}, {_decoded_size(block.data)} bytes, not shown]"
    if isinstance(block, ResourceLink):
        return f"[resource {block.uri}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, BlobResourceContents):
            return f"[resource {resource.uri}: {_decoded_size(resource.blob)} bytes of binary data, not shown]"
        return resource.text
    return f"[{getattr(block, 'type', 'unknown')} content, not shown]"


def _decoded_size(data: str) -> int:
    """The size of what base64 `data` holds, its padding not counted (a 70-byte PNG was said to be 72),
    without decoding it."""
    data = data.rstrip()
    return max(0, len(data) * 3 // 4 - (len(data) - len(data.rstrip("="))))


def describe(exc: BaseException) -> str:
    """`Type: message` of the innermost exception, for /status, the log and the model."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = mask_url_credentials(str(exc)).strip()
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"
