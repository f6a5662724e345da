"""Assembling a turn's context within the model's budget, and recording what went in.

Layers, in order (docs/decisions/000-concepts.md, "The turn"): system prompt, core memory, the
segment's last summary, the skills (each one's name and description, within
`tools.skills.budgetTokens`), related past conversations, auto-RAG ("From earlier in this
conversation:"), the sliding window of the current segment, tools, and the pending messages. The
budget is 90 % of the model's context budget (approximate token counts need the margin); fixed
layers are placed first and the window shrinks to what is left. Summary, past conversations and
auto-RAG are separate small methods: the summary is the segment summarizer's rolling summary; past
conversations come from `PastConversationRetriever` (interactive turns only, within the room the
fixed layers leave).

Auto-RAG runs for interactive turns only, when the segment (not counting the pending messages) holds
more messages than `slidingWindow`. It excludes the window as first fitted and the pending
messages; its block's tokens then come off the window's budget and the window is fitted again, so
the oldest window messages may give way to the recalled ones (they were excluded from recall,
which is the price of not searching twice).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from klaw.command_syntax import parse_command
from klaw.config import ContextConfig
from klaw.engine.context_cut import MESSAGE_OVERHEAD_TOKENS as MESSAGE_OVERHEAD_TOKENS  # still named here
from klaw.engine.context_cut import SAFETY_MARGIN as SAFETY_MARGIN
from klaw.engine.context_cut import cut_to_fit, tools_tokens
from klaw.engine.recalled_parts import recalled_parts
from klaw.engine.sessions import Session
from klaw.engine.system_prompt import SystemPrompt
from klaw.engine.transcript import paired_tool_messages, to_chat_message
from klaw.engine.turn_files import turn_files
from klaw.engine.turn_timing import PhaseTimes
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.messages import ChatMessage, ToolSpec
from klaw.llm.tokens import approximate_token_count
from klaw.log_format import LOG_FILE_ONLY
from klaw.memory.auto_rag import AutoRagService, RecalledMessage, format_block
from klaw.memory.core_memory import CoreMemory
from klaw.memory.hybrid_search import Phase, untimed
from klaw.memory.past_conversations.pipeline import Retrieval
from klaw.memory.past_conversations.retriever import PastConversationRetriever
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageType, Role, StoredMessage

log = logging.getLogger(__name__)
T = TypeVar("T")

SUMMARY_HEADER = "Summary of this conversation so far:"


@dataclass(frozen=True)
class ContextLayer:
    name: str
    tokens: int
    items: int = 1
    parts: tuple[tuple[str, int], ...] = ()  # (name, tokens) of each item where it helps: the tools, per tool
    whole: int = 0  # the pending messages' tokens before klaw cut them to the budget (0: not cut; decision 500)


# The tools layers last computed, by the identities of their tools. The registry hands out the same
# `ToolSpec` objects turn after turn, and counting the schemas (thousands of characters of JSON) was
# the largest single cost of building a context; a spec is frozen, and the memo holds the specs it
# was computed for, so an id in a key cannot be reused by another object while its entry lives.
_TOOLS_LAYERS: dict[tuple[int, ...], tuple[tuple[ToolSpec, ...], ContextLayer]] = {}
_TOOLS_LAYERS_KEPT = 16


def tools_layer(tools: Sequence[ToolSpec]) -> ContextLayer:
    """The tools layer: the whole `tools` array's tokens (what is sent), and each tool's own share
    (its schema alone; the parts add up to the whole give or take the array's brackets)."""
    key = tuple(id(tool) for tool in tools)
    kept = _TOOLS_LAYERS.get(key)
    if kept is not None:
        return kept[1]
    total = tools_tokens(tools)
    parts = tuple((t.name, approximate_token_count(json.dumps(t.to_wire()))) for t in tools)
    layer = ContextLayer("tools", total, len(tools), parts)
    if len(_TOOLS_LAYERS) >= _TOOLS_LAYERS_KEPT:
        del _TOOLS_LAYERS[next(iter(_TOOLS_LAYERS))]
    _TOOLS_LAYERS[key] = (tuple(tools), layer)
    return layer


@dataclass(frozen=True)
class BuiltContext:
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    layers: list[ContextLayer]
    budget: int
    window_rowids: frozenset[int] = field(default_factory=frozenset)
    recalled: list[RecalledMessage] = field(default_factory=list)  # auto-RAG hits, best first
    warnings: list[str] = field(default_factory=list)  # budget problems, for /context (no content)
    timings: PhaseTimes = field(default_factory=PhaseTimes)  # seconds per layer (engine/turn_timing.py)
    notices: list[str] = field(default_factory=list)  # to tell the chat before the model is asked (decision 473)

    @property
    def total_tokens(self) -> int:
        return sum(layer.tokens for layer in self.layers)


def message_tokens(message: StoredMessage) -> int:
    extra = json.dumps(message.record.metadata) if message.record.metadata else ""
    return approximate_token_count(message.content) + approximate_token_count(extra) + MESSAGE_OVERHEAD_TOKENS


@dataclass(frozen=True, eq=False)
class ContextBuilder:
    """`catalogue` gives each model's context budget; `config` is the `context` section."""

    catalogue: ModelCatalogue
    config: ContextConfig
    store: Storage
    system_prompt: SystemPrompt
    core_memory: CoreMemory
    # the model's tools as the registry holds them now: tools registered later are offered too
    tools: Callable[[str], Sequence[ToolSpec]] = lambda _model: ()
    auto_rag: AutoRagService | None = None
    past_conversations: PastConversationRetriever | None = None
    # the skills layer's text (file checks: run in a thread), None when off
    skills: Callable[[], str | None] | None = None
    # the skills layer as last read, in a 1-tuple, when no skill changed since (stat calls only: turn_files.py)
    kept_skills: Callable[[], tuple[str | None] | None] | None = None
    # the skill_call layer: the skills the person's messages call by name, their bodies filled (decision 529)
    skill_call: Callable[[Sequence[str]], str | None] | None = None

    # what each chat was told of its prompt files and budget (`BuiltContext.notices`): said once, again if it changes
    _told: dict[ChatRef, frozenset[str]] = field(default_factory=dict, init=False)

    async def build(
        self, session: Session, pending: Sequence[StoredMessage], *, subagent: bool = False
    ) -> BuiltContext:
        budget = int(self.catalogue.context_budget(session.model) * SAFETY_MARGIN)
        tools = list(self.tools(session.model))
        layers: list[ContextLayer] = []
        head: list[ChatMessage] = []
        warnings: list[str] = []
        timings = PhaseTimes()

        def place(name: str, text: str | None, items: int = 1, parts: tuple[tuple[str, int], ...] = ()) -> None:
            if text:
                head.append(ChatMessage.system(text))
                tokens = approximate_token_count(text) + MESSAGE_OVERHEAD_TOKENS
                layers.append(ContextLayer(name, tokens, items, parts))

        with timings.phase("system_prompt"):  # the three workspace files (their hop when one changed) timed here
            files = await turn_files(
                self.system_prompt, self.core_memory, self.skills, self.kept_skills, budget, tools_layer(tools).tokens
            )
            (prompt, cut), memory, skills = files
            place("system_prompt", prompt)
        with timings.phase("core_memory"):
            place(
                "core_memory",
                f"Core memory (facts you keep about your person):\n{CoreMemory.render(memory)}" if memory else None,
            )
        with timings.phase("summary"):
            place("summary", await self.summary_layer(session))
        if self.skills is not None:
            with timings.phase("skills"):
                place("skills", skills)
                if self.skill_call is not None and not subagent:
                    typed = [m.content for m in pending if m.role is Role.USER]
                    if any(parse_command(text) is not None for text in typed):  # no thread hop for a message:
                        # a turn's hop to a thread and back is ~0.5 ms at 1k (decision 529's addendum)
                        place("skill_call", await asyncio.to_thread(self.skill_call, typed))  # reads SKILL.md
        pending_text = "\n".join(m.content for m in pending)
        tools_tokens = tools_layer(tools).tokens
        pending_tokens = approximate_token_count(pending_text) + MESSAGE_OVERHEAD_TOKENS
        remaining = budget - sum(layer.tokens for layer in layers) - tools_tokens - pending_tokens
        if remaining < 0:
            warnings.append(self._over_budget(session, budget, layers, tools_tokens, pending_tokens))
        # (a turn's messages alone over the budget: message_budget.py said so, with its own way out)
        notices = [] if subagent else self._news(session, cut, warnings if pending_tokens <= budget else [])
        if not subagent:
            with timings.phase("past_conversations"):
                room = max(remaining, 0)
                found = await self.past_conversations_found(session, pending_text, room)
                if found is not None and found.block:
                    place("past_conversations", found.block, max(len(found.shown), 1), recalled_parts(found.shown))
        remaining = budget - sum(layer.tokens for layer in layers) - tools_tokens - pending_tokens

        pending_rowids = {m.rowid for m in pending}
        with timings.phase("window"):
            # One row more than the window can use: whether it came tells auto-RAG's guard that the
            # segment has outgrown the window, without a count of its own (a round trip to the database).
            recent = await self.store.messages.window(
                session.segment.id, self.config.sliding_window + len(pending_rowids) + 1
            )
            # a person's message stored after this turn's is a later turn's: not shown above its own (455)
            newest = max(pending_rowids, default=None)
            candidates = [
                m
                for m in recent
                if m.rowid not in pending_rowids and not (newest and m.role is Role.USER and m.rowid > newest)
            ][-self.config.sliding_window :]
            window = fit_newest(candidates, message_tokens, remaining)
        recalled: list[RecalledMessage] = []
        if not subagent:
            shown = frozenset(m.rowid for m in window) | pending_rowids
            with timings.phase("auto_rag"):
                parts = PhaseTimes()  # the search's parts: auto_rag.full_text, auto_rag.vector, … (decision 404)
                recalled = await self.auto_rag_layer(
                    session, pending, pending_text, shown, remaining, len(recent), parts.phase
                )
                timings.merge(parts, "auto_rag.")
        if recalled:
            place("auto_rag", format_block(recalled), len(recalled))
            window = fit_newest(candidates, message_tokens, remaining - layers[-1].tokens)

        earlier, interrupted = _interrupted_round(window, pending_rowids)
        sent, window_messages = _sendable(earlier)
        sent_after, round_messages = _sendable(interrupted)
        sent += sent_after
        fixed = sum(layer.tokens for layer in layers) + tools_layer(tools).tokens  # the rest is the conversation's
        around = _pending_around(pending, interrupted, round_messages)
        messages = cut_to_fit([*head, *window_messages, *around], len(head), budget - fixed, _chat_tokens)  # 488
        layers.append(
            ContextLayer("sliding_window", sum(message_tokens(m) for m in sent), len(window_messages + round_messages))
        )
        if tools:
            layers.append(tools_layer(tools))
        layers.append(_pending_layer(messages[len(head) + len(window_messages) :], around, round_messages, pending))
        return BuiltContext(
            messages=messages,
            tools=tools,
            layers=layers,
            budget=budget,
            window_rowids=frozenset(m.rowid for m in window),
            recalled=recalled,
            warnings=warnings,
            timings=timings,
            notices=notices,
        )

    async def summary_layer(self, session: Session) -> str | None:
        """The segment's summary so far, as the segment summarizer last rolled it forward."""
        summary = await self.store.summaries.segment_summary(session.segment.id)
        return None if summary is None else f"{SUMMARY_HEADER}\n{summary.text}"

    async def past_conversations_found(self, session: Session, query: str, budget_tokens: int) -> Retrieval | None:
        """Related past segments of this chat and their exchanges (never the current segment), within
        `budget_tokens` and the `rag` settings: the block (None when nothing is related) and what it shows
        (`recalled_parts`); None when disabled, with no room, or on error."""
        if self.past_conversations is None:
            return None
        return await self.past_conversations.retrieve(
            session.chat, session.segment.id, query, budget_tokens - MESSAGE_OVERHEAD_TOKENS
        )

    async def auto_rag_layer(
        self,
        session: Session,
        pending: Sequence[StoredMessage],
        query: str,
        shown_rowids: frozenset[int],
        budget_tokens: int,
        newest: int,
        phase: Phase = untimed,
    ) -> list[RecalledMessage]:
        """Older messages of this segment found by hybrid search, when the segment has outgrown the
        sliding window (the guard); `shown_rowids` are already in the context. `newest` is how many
        of the segment's newest messages the window read found, asking for the window, the pending
        messages and one more: only "more than the window?" matters, so a 100k-message segment
        costs what a short one does."""
        room = budget_tokens - MESSAGE_OVERHEAD_TOKENS
        if self.auto_rag is None or not self.auto_rag.enabled or room <= 0:
            return []
        segment_id = session.segment.id
        in_segment = sum(1 for m in pending if m.segment_id == segment_id)
        # All that were asked for came (window + pending + 1 > window + in_segment), or the whole segment.
        if newest - in_segment <= self.config.sliding_window:
            return []
        return await self.auto_rag.recall(session.chat, segment_id, query, shown_rowids, max_tokens=room, phase=phase)

    def _news(self, session: Session, cut: Sequence[str], warnings: Sequence[str]) -> list[str]:
        """What to tell the chat of its prompt files cut at their cap or left out, and of a context over its
        budget: each once while it lasts, again when it changes (a log warning only showed `klaw chat`'s "see
        chat.log", and the web page nothing). The over-budget sentence names the cut files and the ways out."""
        said = {note: f"{note}." for note in cut}  # by what it is about: an over-budget's figures change each turn
        if warnings:
            files = f" {' '.join(said.values())}" if said else ""
            said = {
                f"over the budget of {session.model}; {'; '.join(cut)}": f"This chat's context is over its budget on"
                f" {session.model}: {warnings[0]}.{files} Give the model a larger contextBudget in engine.yaml, or"
                " offer fewer tools (tools.enabled); `/context` shows each layer."
            }
        told = self._told.get(session.chat, frozenset())
        self._told[session.chat] = frozenset(said)
        return [sentence for key, sentence in said.items() if key not in told]

    @staticmethod
    def _over_budget(
        session: Session, budget: int, layers: Sequence[ContextLayer], tools_tokens: int, pending_tokens: int
    ) -> str:
        """Say (and log, with figures only: to the log file, the chat is told) that the fixed layers alone
        exceed the budget."""
        parts = [*(f"{layer.name} {layer.tokens}" for layer in layers), f"tools {tools_tokens}"]
        parts.append(f"pending {pending_tokens}")
        fixed = sum(layer.tokens for layer in layers) + tools_tokens + pending_tokens
        message = (
            f"the fixed layers take {fixed} tokens, over the {budget}-token budget ({', '.join(parts)}):"
            " no room is left for the conversation window"
        )
        log.warning("context for chat %s: %s", session.chat, message, extra=LOG_FILE_ONLY)
        return message


def _interrupted_round(
    window: Sequence[StoredMessage], pending_rowids: Collection[int]
) -> tuple[list[StoredMessage], list[StoredMessage]]:
    """The window split into what is sent before the pending messages and the tool calls and results
    of a turn that answered them but was cut off (the engine killed while its tools ran; the messages
    resumed at the next start): the tool records that end the window, with no reply after them, stored
    after the first pending message. Those go after the pending message, as they were made, so the
    model goes on from its own calls (a result never recorded is said to be unknown: transcript.py)
    instead of starting over and setting going again what had already run (decision 299). A turn that
    ended normally ends with its reply, so a message that arrived while it ran is sent after all of it."""
    tail = len(window)
    while tail > 0 and window[tail - 1].record.type in (MessageType.TOOL_CALL, MessageType.TOOL_RESULT):
        tail -= 1
    if tail == len(window) or not pending_rowids or window[tail].rowid < min(pending_rowids):
        return list(window), []
    return list(window[:tail]), list(window[tail:])


def _pending_around(
    pending: Sequence[StoredMessage], interrupted: Sequence[StoredMessage], round_messages: Sequence[ChatMessage]
) -> list[ChatMessage]:
    """The pending messages as one user message, or, after a cut-off round, those sent before it, the
    round, then those that arrived while its tools ran ("stop, don't run the backup"), in that order: the
    model must see what the person knew when it made its calls."""
    if not interrupted:
        return [ChatMessage.user("\n".join(m.content for m in pending))]
    start = interrupted[0].rowid
    before = "\n".join(m.content for m in pending if m.rowid < start)
    after = "\n".join(m.content for m in pending if m.rowid > start)
    return [ChatMessage.user(before), *round_messages, *([ChatMessage.user(after)] if after else [])]


def _pending_layer(
    sent: Sequence[ChatMessage],
    around: Sequence[ChatMessage],
    round_messages: Sequence[ChatMessage],
    pending: Sequence[StoredMessage],
) -> ContextLayer:
    """The pending layer as the model was sent it: a message `cut_to_fit` cut counts what was sent, with its
    whole size in `whole` (/context said the whole size, not what the model read: decision 500). `sent` is the
    conversation's tail from the pending messages on, `around` the same before the cut."""
    joined = approximate_token_count("\n".join(m.content for m in pending)) + MESSAGE_OVERHEAD_TOKENS
    rounds = {id(message) for message in round_messages}
    asked = [i for i, message in enumerate(around) if id(message) not in rounds]
    if all(sent[i] is around[i] for i in asked):
        return ContextLayer("pending", joined, len(pending))
    return ContextLayer("pending", sum(_chat_tokens(sent[i]) for i in asked), len(pending), whole=joined)


def _chat_tokens(message: ChatMessage) -> int:
    return approximate_token_count(message.content or "") + MESSAGE_OVERHEAD_TOKENS


def _sendable(window: Sequence[StoredMessage]) -> tuple[list[StoredMessage], list[ChatMessage]]:
    """The window's messages that are really sent (tool fragments dropped), stored and converted.

    `paired_tool_messages` keeps the very objects it is given, so identity maps them back."""
    pairs = [(stored, chat) for stored in window if (chat := to_chat_message(stored)) is not None]
    sent = paired_tool_messages([chat for _, chat in pairs])
    kept = {id(chat) for chat in sent}
    return [stored for stored, chat in pairs if id(chat) in kept], sent


def fit_newest(items: Sequence[T], tokens: Callable[[T], int], budget_tokens: int) -> list[T]:
    """The longest run of newest items whose tokens fit the budget, oldest first: a chat's window
    (messages) or a task's history (whole runs). Never a gap: an older item that would still fit
    after a newer one did not is left out too, so what is sent stays contiguous."""
    kept: list[T] = []
    used = 0
    for item in reversed(items):
        cost = tokens(item)
        if used + cost > budget_tokens:
            break
        kept.append(item)
        used += cost
    kept.reverse()
    return kept
