"""Slash commands: answered at once by the engine, without the model, debounce or the chat's turn lock
(so `/approve` reaches the turn that waits for it). `/forget` alone stops the chat's turn under way and
holds the chat while it erases (decision 219)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from klaw.command_syntax import help_text, skill_not_callable, unknown_command
from klaw.config import CommandConfig
from klaw.disk_trouble import disk_trouble
from klaw.engine.approval import ApprovalGate
from klaw.engine.clock import Clock
from klaw.engine.forget_typed import confirmed, forget_target, question_first
from klaw.engine.frame_dispatch import QueryError
from klaw.engine.memory_commands import MemoryCommands, saved_memory_lines
from klaw.engine.processor import MessageProcessor
from klaw.engine.scheduler_loop import Scheduler
from klaw.engine.sessions import SessionManager
from klaw.engine.tool_listing import ToolListing
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.errors import UnknownModelError
from klaw.memory.auto_rag import RecalledMessage
from klaw.memory.core_memory import CoreMemory
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.forget_targets import typed_target
from klaw.memory.forget_words import ForgetWords, runs_left_sentence, tasks_left_sentence
from klaw.memory.forgetting import ForgetError, ForgetKind, ForgetOutcome, ForgetPlan, Forgetting
from klaw.store.protocol import MemoryChunkRepository
from klaw.store.records import ChatRef
from klaw.text_preview import PREVIEW_CHARS, preview
from klaw.tools.inventory import NOT_A_TOOL, ToolRow
from klaw.tools.skills.skill_files import Skill

log = logging.getLogger(__name__)

# The id of the command being handled (set by `CommandHandler.handle` for state-changing commands).
_command_id: ContextVar[str | None] = ContextVar("klaw_command_id", default=None)


@dataclass(frozen=True)
class CommandAnswer:
    """A command's reply, and whether it erased something of the chat (a `/forget` carried out or already
    carried out under this id): only then is its notice marked `forgotten`, so a refused `/forget` does not
    make the web page drop its kept events and reload the chat."""

    text: str
    erased: bool = False
    skill_call: bool = False  # `/name args` calls a skill: the text is a message for a turn, not answered (529)


@dataclass(eq=False)
class CommandHandler:
    """`commands`: `commands` in engine.yaml, what /help lists. `status_lines`: parts that add lines of
    their own to /status (the MCP servers); `status_first`: those said above everything else, where a person
    looks first (engine.yaml changed since the start, which makes the rest what the engine loaded)."""

    _: KW_ONLY
    catalogue: ModelCatalogue
    commands: Sequence[CommandConfig]
    sessions: SessionManager
    core_memory: CoreMemory
    processor: MessageProcessor
    clock: Clock
    started_at: datetime
    embedding_queue: EmbeddingQueue | None = None
    scheduler: Scheduler | None = None
    forgetting: Forgetting | None = None
    forget_words: ForgetWords  # where `/forget` says it erased (the migrate's copy: ForgetOutcome.copy)
    memory_commands: InitVar[MemoryCommands | None] = None
    approvals: ApprovalGate | None = None
    saved_memories: MemoryChunkRepository | None = None  # `/memory` lists the chat's latest
    tool_listing: InitVar[ToolListing | None] = None
    status_lines: Sequence[Callable[[], list[str]]] = ()
    status_first: Sequence[Callable[[], list[str]]] = ()
    # The model a program gave (`Klaw(model=...)`) answering a configured id, by name; None: the configured one
    stand_in: Callable[[str], str | None] = lambda _model_id: None
    skill: Callable[[str], Skill | None] = lambda _name: None  # /weather-report calls a skill (decision 529)
    # the skills /help lists as called by name: their names, or names to descriptions (decision 540)
    skill_names: Callable[[], Collection[str]] = lambda: ()
    skipped_skills: Callable[[], Collection[str]] = lambda: ()  # folders a rule left out: /Upper is told why (543)
    _handlers: dict[str, Callable[[ChatRef, str], Awaitable[str]]] = field(init=False)
    _listing: ToolListing | None = field(init=False, default=None)

    def __post_init__(self, memory_commands: MemoryCommands | None, tool_listing: ToolListing | None) -> None:
        self._handlers = {
            "new": self._new,
            "model": self._model,
            "models": self._models,
            "memory": self._memory,
            "status": self._status,
            "help": self._help,
            "context": self._context,
            "forget": self._forget,
        }
        if memory_commands is not None:  # /summarizer, /embeddings, /rag
            self._handlers.update(memory_commands.handlers())
        if self.approvals is not None:  # /approve, /deny: answered at once, while the turn that asked waits
            self._handlers.update(self.approvals.handlers())
        self._listing = tool_listing  # /status marks a held name no tool has
        if tool_listing is not None:  # /tools
            self._handlers.update(tool_listing.handlers())

    def knows(self, name: str) -> bool:
        """Whether `/name` is a command this engine answers (else `handle` says "Unknown command")."""
        return name.lower().lstrip("/") in self._handlers

    async def handle(self, chat: ChatRef, name: str, args: str = "", command_id: str | None = None) -> str:
        """Run a command; `command_id`, its gateway's: replayed, it changes nothing twice (not two `/new`s)."""
        return (await self.answer(chat, name, args, command_id)).text

    async def answer(self, chat: ChatRef, name: str, args: str = "", command_id: str | None = None) -> CommandAnswer:
        """`handle`, saying too whether the command erased something (`CommandAnswer.erased`)."""
        key = name.lower().lstrip("/")
        handler = self._handlers.get(key)
        if handler is None:
            skill = await asyncio.to_thread(self.skill, key)  # the catalogue may scan the skills folder
            if skill is None:
                names, skipped = await asyncio.to_thread(lambda: (self.skill_names(), self.skipped_skills()))
                return CommandAnswer(unknown_command(name, [*self._handlers, *names], skipped))
            return (
                CommandAnswer("", skill_call=True) if skill.user_invocable else CommandAnswer(skill_not_callable(key))
            )
        token = _command_id.set(command_id)
        try:
            if key == "forget":
                return await self._forget_answer(chat, args.strip())
            return CommandAnswer(await handler(chat, args.strip()))
        finally:
            _command_id.reset(token)

    async def _new(self, chat: ChatRef, args: str) -> str:
        """A new segment. Words after `/new` are not a message (no command reaches the model): said, not dropped."""
        await self.sessions.new_segment(chat, record_id=_command_id.get())
        started = (
            "Started a new conversation. Recent messages are out of my window now; core memory, "
            "your model and the full conversation log are kept."
        )
        if args:
            words = preview(args, PREVIEW_CHARS)
            started += f" The words after /new were not sent ({words!r}): send them as a message."
        return started

    async def _model(self, chat: ChatRef, args: str) -> str:
        if not args:
            session = await self.sessions.get_or_create(chat)
            return f"Current model: {session.model}"
        try:
            session = await self.sessions.switch_model(chat, args, record_id=_command_id.get())
        except UnknownModelError as exc:
            return _sentence(str(exc))
        return f"Switched this chat to {session.model}."

    async def _models(self, chat: ChatRef, _: str) -> str:
        current = (await self.sessions.get_or_create(chat)).model
        lines = ["Configured models (context budget in tokens):"]
        for model_id in self.catalogue.ids:
            marker = " (current)" if model_id == current else ""
            lines.append(f"- {model_id}: {self.catalogue.context_budget(model_id)}{marker}")
        return "\n".join(lines)

    async def _memory(self, chat: ChatRef, _: str) -> str:
        """Core memory, then the chat's latest saved memories (`memory_save`) with the ids `/forget
        memory N` takes: a person who asked the agent to remember something sees where it went."""
        memory = await self.core_memory.read()
        lines = ["Core memory:\n" + CoreMemory.render(memory) if memory else "Core memory is empty."]
        if self.saved_memories is not None:
            lines += await saved_memory_lines(self.saved_memories, chat)
        return "\n".join(lines)

    async def engine_status(self, chat_lines: Sequence[str] = ()) -> list[str]:
        """/status's lines that are the engine's, not a chat's, with `chat_lines` after its uptime: the socket's
        `status` query gives them to `klaw status` without touching a chat (decision 510)."""
        uptime = self.clock.now() - self.started_at
        slots = self.processor.slots
        lines = [line for source in self.status_first for line in source()]
        lines += [
            f"Uptime: {_duration(uptime.total_seconds())}",
            *chat_lines,
            f"Queue depth: {slots.queue_depth} waiting for an LLM slot,"
            f" {self.processor.waiting_chats} chat(s) in debounce",
            f"LLM slots in use: {slots.in_use}/{slots.size}",
        ]
        if self.embedding_queue is not None:
            queue = await self.embedding_queue.status()
            line = f"Embedding queue: {queue.pending} pending, {queue.failed} failed"
            if queue.failed:
                line += " (gave up after retries; the engine log names the error)"
            if queue.last_error is not None:
                line += f"; the last try failed: {queue.last_error}"
            lines.append(line)
        if self.scheduler is not None:
            try:
                lines.append(await _scheduler_line(self.scheduler))
            except Exception as exc:  # scheduler.db unreadable (a full disk, adversary14): the rest is still said
                log.warning("/status: the scheduled tasks could not be read (%s)", type(exc).__name__)
                lines.append(f"Scheduled tasks: cannot be read now ({_unread(self.scheduler, exc)})")
        for source in self.status_lines:
            lines += source()
        return lines

    async def _status(self, chat: ChatRef, _: str) -> str:
        session = await self.sessions.get_or_create(chat)
        said = [
            f"Model: {session.model}{_answered_by(self.stand_in(session.model))}",
            f"Segment started: {session.segment.started_at.isoformat(timespec='seconds')}",
        ]
        lines = await self.engine_status(said)
        if self.approvals is not None and self.approvals.tools:
            waiting = self.approvals.describe_waiting(chat)
            rows = self._listing.not_tool_rows(session.model) if self._listing is not None else []
            unknown = {row.name: _not_held(row) for row in rows}
            held = [f"{name} ({unknown[name]})" if name in unknown else name for name in sorted(self.approvals.tools)]
            lines.append(f"Held for approval: {', '.join(held)}; waiting here: {waiting}")
        return "\n".join(lines)

    async def _forget(self, chat: ChatRef, args: str) -> str:
        return (await self._forget_answer(chat, args)).text

    async def forget_for_program(self, chat: ChatRef, args: str) -> str:
        """`Klaw.forget` (decision 540): `/forget ARGS` carried out without asking first; ForgetError in its words."""
        return (await self._forget_carried(chat, args, program=True)).text

    async def _forget_answer(self, chat: ChatRef, args: str) -> CommandAnswer:
        try:
            return await self._forget_carried(chat, args)
        except ForgetError as exc:
            return CommandAnswer(f"Cannot forget: {exc}.")

    async def _forget_carried(self, chat: ChatRef, args: str, *, program: bool = False) -> CommandAnswer:
        """The chat's turn under way is stopped, then the target planned again (`last`: the last message sent) and
        forgotten with the chat quiet: all that turn wrote goes and it writes nothing after (decision 219). A target
        refused (ForgetError) is refused before any turn is stopped; `program`: never asked first (`Klaw.forget`)."""
        if self.forgetting is None:
            raise ForgetError("forgetting is not available in this engine")
        forgetting = self.forgetting
        record_id = _command_id.get()
        if await self.forgetting.already_done(record_id):
            return CommandAnswer("Already forgotten.", erased=True)
        args, sure = confirmed(args)  # a segment of more than one message is asked about first (decision 526)
        # `last` with a message under way is that message's exchange, which may not exist before it is stopped
        if not (args.lower().split() == ["last"] and self.processor.has_under_way(chat)):
            plan = await self.forgetting.plan(*await forget_target(self.forgetting, chat, args), chat)
            if not (sure or program) and (question := await question_first(forgetting, chat, args, plan)) is not None:
                return CommandAnswer(question)
        plan, outcome, stopped = await self._forget_stopping(
            chat, lambda: forget_target(forgetting, chat, args), record_id
        )
        stopped_first = "Stopped the turn under way in this chat, then forgot" if stopped else "Forgot"
        erased = self.forget_words.erased_from(outcome.files_rewritten)
        return CommandAnswer(  # the erasure its own sentence: after describe's parenthesis it read as its part
            f"{stopped_first} {plan.said}: {plan.describe()}. It is {erased}."
            f" Core memory is unchanged: /memory shows it.{outcome.copy}"
            f"{await self.forget_words.discard_build()}"
            f"{tasks_left_sentence(await self._tasks_left(plan))}"
            f"{runs_left_sentence(plan.spawned_runs)}",
            erased=True,
        )

    async def _tasks_left(self, plan: ForgetPlan) -> list[str]:
        """The tasks the forgotten records scheduled that are still scheduled (decision 280)."""
        wanted = plan.scheduled_tasks
        if not wanted or self.scheduler is None:
            return []
        scheduled = {task.name for task in await self.scheduler.list_tasks()}
        return [name for name in wanted if name in scheduled]

    async def _forget_stopping(
        self, chat: ChatRef, target: Callable[[], Awaitable[tuple[ForgetKind, int | str]]], record_id: str | None
    ) -> tuple[ForgetPlan, ForgetOutcome, bool]:
        """The chat's turn under way stopped, the target planned with the chat quiet and forgotten, and
        what the engine still holds of the text in memory (the last turns' context records) dropped."""
        assert self.forgetting is not None
        async with self.processor.turn_stopped(chat) as stopped:
            plan = await self.forgetting.plan(*await target(), chat)
            outcome = await self.forgetting.forget(plan, record_id=record_id)
            stopped.erased = frozenset(plan.ids)
        self.processor.last_context.pop(chat, None)
        self.processor.context_history.drop(chat)
        return plan, outcome, bool(stopped)

    async def forget_answer(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The socket's `forget` query, `klaw memory forget` while this engine runs: {kind, id, channel and
        chat_id (optional: any chat), confirm} → the plan ({chat, label, describe}), carried out (with
        `files_rewritten`, `stopped`) when `confirm` is true; a target refused is a QueryError."""
        if self.forgetting is None:
            raise QueryError("forgetting is not available in this engine")
        forgetting = self.forgetting
        try:
            kind = ForgetKind(str(params.get("kind")))
            target = typed_target(kind, str(params.get("id")))
            owner = ChatRef(str(params["channel"]), str(params["chat_id"])) if params.get("channel") else None
            plan = await forgetting.plan(kind, target, owner)
            answer: dict[str, Any] = {"chat": str(plan.chat), "label": plan.said, "describe": plan.describe()}
            if params.get("confirm") is not True:
                return answer

            async def same() -> tuple[ForgetKind, int | str]:
                return kind, target

            plan, outcome, stopped = await self._forget_stopping(plan.chat, same, None)
        except (ForgetError, ValueError) as exc:
            raise QueryError(str(exc)) from None
        return {
            **answer,
            "describe": plan.describe(),
            "files_rewritten": outcome.files_rewritten,
            "copy": outcome.copy,
            "stopped": stopped,
            "tasks": await self._tasks_left(plan),
            "runs": plan.spawned_runs,
        }

    async def _help(self, _chat: ChatRef, about: str) -> str:
        names, skipped = await asyncio.to_thread(lambda: (self.skill_names(), self.skipped_skills()))
        return help_text(self.commands, about, names, skipped)

    async def _context(self, chat: ChatRef, _: str) -> str:
        context = self.processor.last_context.get(chat)
        if context is None:
            return "No turn has been built for this chat since the engine started."
        lines = [f"Last turn's context: {context.total_tokens} of {context.budget} tokens"]
        for layer in context.layers:
            said = _LAYER_WORDS.get(layer.name, "")
            if layer.whole:  # decision 500: what the model was sent, and that it was cut
                said += (
                    f"; cut from {layer.whole} tokens: over the budget, the model was sent the start of the"
                    " message and a line saying klaw cut it there"
                )
            lines.append(f"- {layer.name}: {layer.tokens} tokens ({layer.items} item(s)){said}")
            lines += [f"    {name}: {tokens}" for name, tokens in layer.parts]
        if context.recalled:
            lines.append("Auto-RAG recalled (best first; fused score, vector distance, full-text rank):")
            lines += [f"  {rank}. {_recalled_line(r)}" for rank, r in enumerate(context.recalled, start=1)]
        lines += [f"Warning: {warning}" for warning in context.warnings]
        return "\n".join(lines)


_LAYER_WORDS = {
    # newcomer20: "pending: 20 tokens (1 item(s))" was never explained, on screen or in the docs
    "pending": ": the new message(s) the turn answered, sent after everything above",
}


def _recalled_line(recalled: RecalledMessage) -> str:
    """One auto-RAG hit for the person whose chat it is: scores and a short preview."""
    hit = recalled.hit
    distance = f"{hit.distance:.3f}" if hit.distance is not None else "-"
    fts = f"#{hit.fts_rank}" if hit.fts_rank is not None else "-"
    shown = preview(recalled.text, PREVIEW_CHARS)
    return f"[{hit.message.role.value}] score {hit.score:.4f}, distance {distance}, full text {fts}: {shown}"


def _not_held(row: ToolRow) -> str:
    """Why a held name holds nothing, for /status: a group not enabled (its fix), or no tool at all."""
    return "not a tool: misspelt? it holds nothing" if row.reason == NOT_A_TOOL else f"{row.reason}; {row.fix}"


def _unread(scheduler: Scheduler, exc: Exception) -> str:
    """Why scheduler.db could not be read: its disk's trouble in klaw's words (decision 320), else the class."""
    path = getattr(scheduler.store, "path", None)
    said = disk_trouble(path, exc) if isinstance(path, Path) else None
    return said or f"{type(exc).__name__}; the engine log says more"


async def _scheduler_line(scheduler: Scheduler) -> str:
    status = await scheduler.status()
    line = f"Scheduled tasks: {status.tasks}, subagent runs in progress: {len(status.running)}"
    if status.running:
        line += f" ({', '.join(status.running)})"
    upcoming = status.next_task
    if upcoming is not None and upcoming.next_run_at is not None:
        at = upcoming.next_run_at.astimezone(scheduler.zone).isoformat(timespec="seconds")
        line += f"; next: {upcoming.name} at {at}"
    return line


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return (f"{days}d " if days else "") + f"{hours:02d}:{minutes:02d}:{secs:02d}"


def _sentence(text: str) -> str:
    """An error message as a reply: capitalised, ending with a full stop."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _answered_by(stand_in: str | None) -> str:
    """After the configured id on `/status`: who answers it when the program gave a model of its own."""
    return "" if stand_in is None else f" (answered by {stand_in}, the program's own model)"
