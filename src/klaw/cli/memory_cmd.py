"""`klaw memory search`: the agent's own hybrid search, from the command line, with its scores.
(`klaw memory forget` lives in memory_forget_cmd.py.)

It runs the same `HybridSearch` auto-RAG uses (vector KNN + full text, fused by weighted scores,
shared with neighbouring messages) so a person can see what the agent would recall for a question
and why: final score, vector distance, full-text rank (a row with neither is there as the neighbour
of a hit). Unlike auto-RAG it shows the messages still in the sliding window too, and applies no
relevance threshold: it is for looking, not for filling a context. Rows auto-RAG would drop as
unrelated (found by the vector side alone, farther than `autoRag.relevanceThreshold`) are dimmed.

It searches the whole chat unless told `--segment current`: a person looking for something said
last week, before a `/new`, expects to find it (as the agent's `memory_search` and `Klaw.search_memory`
do); auto-RAG's own scope, the current segment, is the narrower choice.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console, JustifyMethod
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from klaw.cli.context import fail, open_store_or_exit, stdout_console, stored_home_or_exit
from klaw.cli.memory_forget_cmd import register_forget
from klaw.cli.memory_list_cmd import register_list
from klaw.errors import KlawError
from klaw.memory.segment_numbers import segment_words
from klaw.store.errors import StoreNotSetUp
from klaw.terminal_text import visible

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.config import EngineConfig
    from klaw.memory.embedder.protocol import Embedder
    from klaw.memory.hybrid_search import HybridHit
    from klaw.store.protocol import Storage
    from klaw.store.records import ChatRef, MessageRecord

app = typer.Typer(
    rich_markup_mode="markdown", help="Look into what klaw remembers of your conversations.", no_args_is_help=True
)
register_forget(app)  # `klaw memory forget` (cli/memory_forget_cmd.py)

PREVIEW_CHARS = 80
# Below this width the figures would squeeze the message to a word per line: each hit becomes a line
# of figures with its message under it, across the whole width.
WIDE_TABLE_COLUMNS = 120
BEYOND = "[beyond threshold]"  # a hit auto-RAG would not recall, where nothing can be dimmed


SHORT_SAMPLE = 2000  # messages `_too_short` reads, the newest
NO_VECTORS = "vector side off: no message vectors are stored yet (full text only)"


class SegmentScope(StrEnum):
    ALL = "all"
    CURRENT = "current"


class SearchProblem(KlawError):
    """Something the person must fix (which chat, an unknown chat…); the message says what."""


@dataclass(frozen=True)
class SearchOutcome:
    chat: ChatRef
    scope: str
    hits: list[HybridHit]
    vector_note: str
    threshold: float
    older_segments: int = 0
    """Segments the search left out (--segment current); the output says how to include them."""
    numbers: dict[int, int] = field(default_factory=dict)
    """Each segment id of the chat and its number within it, shown beside the id (decision 402)."""
    too_short: str = ""
    """When no result came from the vector side: how many messages searched are too short to embed, or ''."""
    elsewhere: str = ""
    """When no --chat was given and other chats are stored: which chat was searched and which others hold
    the words (decision 513), or ''."""


@app.command()
def search(
    text: Annotated[str, typer.Argument(help="What to look for, written as you would ask the agent.")],
    chat: Annotated[
        str | None,
        typer.Option("--chat", help="The chat, e.g. web:main (default: your console chat, or the only chat)."),
    ] = None,
    segment: Annotated[
        SegmentScope,
        typer.Option(
            "--segment", help="all: the whole chat, every segment; current: since the last /new (auto-RAG's scope)."
        ),
    ] = SegmentScope.ALL,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100, help="How many results to show.")] = 10,
) -> None:
    """Hybrid search (vector + full text, with neighbouring messages) over all of one chat's messages, with scores."""
    home, loaded, path = stored_home_or_exit()
    try:
        outcome = asyncio.run(_search(path, home.embedder_cache, loaded.config, text, chat, segment, limit))
    except (SearchProblem, StoreNotSetUp) as exc:  # nothing made where klaw never set a database up (467)
        fail(str(exc), code=1)
    _print(outcome, limit)


async def _search(
    path: Path,
    embedder_cache: Path,
    config: EngineConfig,
    text: str,
    chat_arg: str | None,
    scope: SegmentScope,
    limit: int,
) -> SearchOutcome:
    from klaw.memory.hybrid_search import HybridSearch

    store = await open_store_or_exit(path, config.database, reads_only=True)
    try:
        chat = await _pick_chat(store, chat_arg)
        segment_id: int | None = None
        scope_label = "all segments"
        older = 0
        segments = await store.segments.list(chat)
        numbers = {segment.id: number for number, segment in enumerate(segments, start=1)}
        if scope is SegmentScope.CURRENT and segments:
            current = next((s for s in reversed(segments) if s.ended_at is None), segments[-1])
            segment_id = current.id
            older = len(segments) - 1
            named = segment_words(numbers.get(current.id), current.id)
            scope_label = f"current {named}, since {current.started_at:%Y-%m-%d %H:%M} UTC"
        embedder, note = await _embedder_for(store, config, embedder_cache)
        try:
            hybrid = HybridSearch(store, embedder, config.search)
            hits = await hybrid.look(chat, text, segment_id=segment_id, limit=limit)
        finally:
            if embedder is not None:
                await embedder.aclose()
        short = ""
        if (embedder is not None or note == NO_VECTORS) and all(hit.distance is None for hit in hits):
            searched = [segment_id] if segment_id is not None else [segment.id for segment in segments]
            short = await _too_short(store, searched, config.auto_rag.min_message_tokens)
        threshold = config.auto_rag.relevance_threshold
        elsewhere = await _other_chats_with(store, chat, text) if chat_arg is None else ""
        return SearchOutcome(chat, scope_label, hits, note, threshold, older, numbers, short, elsewhere)
    finally:
        await store.aclose()


async def _pick_chat(store: Storage, chat_arg: str | None) -> ChatRef:
    from klaw.chat_listing import some_chats
    from klaw.store.records import ChatRef

    chats = sorted(await store.segments.chats(), key=str)

    def listing(wanted: str) -> str:  # the closest few of thousands, not all (decision 479)
        names, more = some_chats(chats, wanted)
        return "\n".join(f"  {name}" for name in [*names, more] if name)

    if chat_arg is None:
        if not chats:
            raise SearchProblem("no chat is stored yet: talk to the agent first.")
        if len(chats) == 1:
            return chats[0]
        # The console chat, as `klaw tools` and `klaw chat` default to; the heading names the chat used.
        from klaw.channels.console import console_chat

        if (mine := console_chat()) in chats:
            return mine
        raise SearchProblem(
            f"several chats are stored, none of them {mine}; choose one with --chat:\n{listing(str(mine))}"
        )
    channel, sep, chat_id = chat_arg.partition(":")
    try:
        if not sep:
            raise ValueError("write the chat as channel:chat_id, e.g. console:me")
        chat = ChatRef(channel, chat_id)
    except ValueError as exc:
        raise SearchProblem(f"--chat {chat_arg!r}: {exc}") from None
    if chat not in chats:
        known = f"stored chats:\n{listing(chat_arg)}" if chats else "no chat is stored yet."
        raise SearchProblem(f"no chat {chat} in the database; {known}")
    return chat


OTHER_CHATS_LOOKED_AT = 20  # the most recently active; a home with thousands of chats is not read whole


async def _other_chats_with(store: Storage, searched: ChatRef, text: str) -> str:
    """Which chat a search without --chat read, and the other chats whose messages hold `text`'s words (full text,
    up to 20 of the most recently active): a person living in the web page searched the console chat by default,
    saw only unrelated hits and took memory for lost (newcomer22). '' when no other chat is stored."""
    others = [chat for chat in await store.segments.chats() if chat != searched]  # the newest segment first
    if not others:
        return ""
    found = [chat for chat in others[:OTHER_CHATS_LOOKED_AT] if await store.search.full_text(chat, text, limit=1)]
    said = f"Searched {searched}, the default chat; --chat channel:chat_id searches another."
    if found:
        return f"{said} These chats hold these words too: {', '.join(map(str, found))}."
    capped = f" (of the {OTHER_CHATS_LOOKED_AT} most recently active)" if len(others) > OTHER_CHATS_LOOKED_AT else ""
    return f"{said} No other chat{capped} holds these words."


async def _embedder_for(store: Storage, config: EngineConfig, cache_dir: Path) -> tuple[Embedder | None, str]:
    """The configured embedder when the stored vectors are its own; otherwise full text only, saying why
    (a package missing: the sentence naming the command that installs it, as `klaw config check` says)."""
    from klaw.memory.embedder.factory import create_embedder, embedder_problem

    if (problem := embedder_problem(config.embedder)) is not None:
        return None, f"vector side off (full text only): {problem}"
    bound = await store.vectors.bound_embedder()
    if bound is None:
        return None, NO_VECTORS
    try:
        embedder = create_embedder(config.embedder, cache_dir=cache_dir)
    except Exception as exc:
        return None, f"vector side off: the configured embedder cannot start ({type(exc).__name__}); full text only"
    if (embedder.model_id, embedder.dim) != (bound.embedder_id, bound.dim):
        await embedder.aclose()
        return None, (
            f"vector side off: stored vectors come from {bound.embedder_id} (dim {bound.dim}), the configured"
            f" embedder is {embedder.model_id} (dim {embedder.dim}); run 'klaw reindex' (full text only)"
        )
    return embedder, f"vector side: {embedder.model_id}"


async def _too_short(store: Storage, segment_ids: list[int], min_tokens: int) -> str:
    """One line saying how many of the messages searched are never embedded, being shorter than
    `autoRag.minMessageTokens` (the rule ingestion applies: `should_embed`), or '' when none is. Asked only
    when no result shown has a vector distance: that looked like a broken embedder when the chat's messages
    were short (lows20). Only the newest `SHORT_SAMPLE` messages are read: enough to say it, where reading a
    chat of 100,000 messages took most of the command's time and memory."""
    from klaw.memory.embedding_policy import should_embed

    said: list[MessageRecord] = []
    for segment_id in reversed(segment_ids):  # the newest segment first, its newest messages
        said = [m.record for m in await store.messages.window(segment_id, SHORT_SAMPLE - len(said))] + said
        if len(said) >= SHORT_SAMPLE:
            break
    conversation = [record for record in said if record.is_conversation]
    short = sum(1 for record in conversation if not should_embed(record, min_tokens))
    if not short:
        return ""
    searched = f"the newest {len(conversation)}" if len(said) >= SHORT_SAMPLE else f"the {len(conversation)}"
    return (
        f"No result shown came from the vector side: {short} of {searched} messages searched are shorter than"
        f" autoRag.minMessageTokens ({min_tokens} estimated tokens), so never embedded; full text finds them."
    )


def _unrelated(hit: HybridHit, threshold: float) -> bool:
    return hit.fts_rank is None and hit.distance is not None and hit.distance > threshold


def _print(outcome: SearchOutcome, limit: int) -> None:
    console = stdout_console()
    _print_results(console, outcome, limit)
    if outcome.elsewhere:
        console.print(outcome.elsewhere, highlight=False)
    if outcome.too_short:
        console.print(outcome.too_short, style="dim", highlight=False)
    if outcome.older_segments:
        console.print(
            f"Searched the current segment only; {outcome.older_segments} older segment"
            f"{'s' if outcome.older_segments > 1 else ''} of this chat: add --segment all to search them too.",
            style="dim",
            highlight=False,
        )


def _print_results(console: Console, outcome: SearchOutcome, limit: int) -> None:
    if not outcome.hits:
        console.print(f"No message of {outcome.chat} ({outcome.scope}) matches.", highlight=False)
        console.print(outcome.vector_note, style="dim", highlight=False)
        return
    # Without colour (a pipe, a file, NO_COLOR) nothing is dimmed: those hits are marked in words instead
    # (newcomer20: the legend named a dimming nobody could see).
    plain = console.color_system is None or console.no_color
    marked = f"marked {BEYOND}" if plain else "dimmed"
    caption = (
        f"{outcome.vector_note.rstrip('.')}; {marked}: found by vectors alone beyond the relevance threshold"
        f" ({outcome.threshold}), which auto-RAG would not recall. FTS rank also counts the words of the"
        " messages just before and after (at a lower weight), so a reply can rank for its question's words"
    )
    table = Table(title=f"{outcome.chat}: {outcome.scope}", caption=caption)
    columns: list[tuple[str, JustifyMethod]] = [
        ("#", "right"),
        ("score", "right"),
        ("distance", "right"),
        ("FTS rank", "right"),
        ("role", "left"),
        ("time (UTC)", "left"),
        ("segment", "right"),
        ("message", "left"),
    ]
    if console.width < WIDE_TABLE_COLUMNS:
        _print_stacked(console, outcome, limit, caption, plain=plain)
        return
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for rank, hit in enumerate(outcome.hits[:limit], start=1):
        record = hit.message.record
        preview = _preview(record.content)
        table.add_row(
            str(rank),
            f"{hit.score:.4f}",
            "-" if hit.distance is None else f"{hit.distance:.3f}",
            "-" if hit.fts_rank is None else str(hit.fts_rank),
            record.role.value,
            f"{record.created_at:%Y-%m-%d %H:%M:%S}",
            segment_words(outcome.numbers.get(hit.message.segment_id), hit.message.segment_id).removeprefix("segment "),
            Text(f"{BEYOND} {preview}" if plain and _unrelated(hit, outcome.threshold) else preview),  # never markup
            style="dim" if _unrelated(hit, outcome.threshold) else None,
        )
    console.print(table)


def _print_stacked(console: Console, outcome: SearchOutcome, limit: int, caption: str, *, plain: bool) -> None:
    console.print(f"{outcome.chat}: {outcome.scope}", style="bold", highlight=False)
    for rank, hit in enumerate(outcome.hits[:limit], start=1):
        record = hit.message.record
        distance = "-" if hit.distance is None else f"{hit.distance:.3f}"
        fts = "-" if hit.fts_rank is None else str(hit.fts_rank)
        style = "dim" if _unrelated(hit, outcome.threshold) else ""
        mark = f" {BEYOND}" if plain and style else ""
        console.print(
            f"{rank}. score {hit.score:.4f}, distance {distance}, FTS rank {fts}, {record.role.value},"
            f" {record.created_at:%Y-%m-%d %H:%M:%S} UTC,"
            f" {segment_words(outcome.numbers.get(hit.message.segment_id), hit.message.segment_id)}{mark}",
            style=style,
            highlight=False,
        )
        preview = Text(_preview(record.content), style=style)
        # Padding fills each line to the width with spaces: into a pipe the line is printed whole instead.
        console.print(Padding(preview, (0, 0, 0, 3)) if console.is_terminal else Text("   ") + preview)
    console.print(caption, style="dim", highlight=False)


def _preview(content: str) -> str:
    preview = visible(" ".join(content.split()))
    return preview if len(preview) <= PREVIEW_CHARS else preview[: PREVIEW_CHARS - 1] + "…"


register_list(app, _pick_chat)  # `klaw memory list` (cli/memory_list_cmd.py)
