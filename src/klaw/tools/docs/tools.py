"""`docs_list`, `docs_read`, `docs_search`: the docs group of `tools.enabled`, over the docs shipped with klaw.

`DOCS_PROMPT` is the paragraph the engine adds to the system prompt when the group is offered, so
the model knows its own manual exists and how to use it. A page is named by its path in the docs
(`memory/forgetting.md`); a name that is not a page is refused (a ToolRefusal: the model reads where
to find the names, the log gets no traceback).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import Field

from klaw.tools.calls import ToolRefusal
from klaw.tools.docs.bundle import DocsBundle
from klaw.tools.docs.index import DocsIndex
from klaw.tools.registry import ToolRegistry

SEARCH_LIMIT = 5  # pages per search: enough to choose from, few enough to stay cheap

DOCS_PROMPT = (
    'How to use your documentation: docs_search("query") for any question about how you work, a command, a'
    " setting or an error (indexed by meaning: plain questions work well); docs_list to browse all topics;"
    ' docs_read("path/file.md") for a whole page.'
)


def register_docs_tools(registry: ToolRegistry, bundle: DocsBundle, index: DocsIndex) -> None:
    """Offer the three docs tools over `bundle`, searched through `index`."""

    async def docs_list() -> list[dict[str, str]]:
        """List your (klaw's) doc pages: path, title."""
        return await asyncio.to_thread(lambda: [{"path": p, "title": bundle.title(p)} for p in bundle.pages()])

    async def docs_read(path: Annotated[str, Field(description="As docs_list gives it")]) -> str:
        """Read one of your doc pages."""
        try:
            return await asyncio.to_thread(bundle.read, path)
        except KeyError:
            raise ToolRefusal(f"there is no page {path!r}: docs_list lists the pages, docs_search finds one") from None

    async def docs_search(
        query: Annotated[str, Field(description="A question, e.g. 'how do I forget something'")],
    ) -> list[dict[str, Any]] | str:
        """Search your docs: best pages first, each with its best section."""
        hits = await index.search(query, SEARCH_LIMIT)
        if not hits:
            return "No page matches; docs_list lists them all."
        return [{"path": h.path, "section": h.heading, "excerpt": h.excerpt, "score": h.score} for h in hits]

    registry.register(docs_list)
    registry.register(docs_read)
    registry.register(docs_search)
