"""A server's whole tool list, asked a page at a time: at most `MAX_LIST_PAGES` pages, so a server whose
cursor never ends cannot hold a start forever."""

from __future__ import annotations

from mcp import Client
from mcp.types import Tool

MAX_LIST_PAGES = 20


async def list_all_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools
