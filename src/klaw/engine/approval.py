"""Approval of dangerous tools: the engine holds a call of a tool named in `tools.approval` and asks the person
in the chat, who answers `/approve ID` or `/deny ID` (docs/tools.md, "Approval"; docs/decisions/107-tool-approval.md).

One mechanism over tool names, so host_exec, an MCP server's tool or a plugin's tool are held alike: the tool
loop asks `ApprovalGate.check` before it runs a call, and a call that is not approved never reaches the registry;
the model reads why as the call's result. The question is an ordinary outbound notice (every channel shows it)
carrying the request's id (`Outbound.approval`), so a channel may offer its own way to answer (the console: y/n).

The answer arrives as a slash command, which the engine handles at once, outside the chat's debounce and turn
lock: the turn that asked holds that lock while it waits, and a queued answer would wait for the turn that waits
for it. No answer within `tools.approvalTimeoutSeconds` (engine clock) is a denial. A turn with nobody to ask
(a task's run) runs a held tool only if its task was created allowing it (decision 379); else it is denied.
A subagent spawned from a chat asks that chat's person, the question naming the subagent (decision 525).

Logged: the request id, tool name, chat and decision, never the arguments (they are the conversation); the
decision is also on the tool result's record. Open questions are noted on disk too (open_questions.py, 447)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from klaw.engine.approval_elsewhere import may_answer, waits_there, which
from klaw.engine.approval_outcome import Decision as Decision  # read here by the tool loop and tests
from klaw.engine.approval_outcome import outcome_text
from klaw.engine.approval_question import call_arguments, question, shown_arguments
from klaw.engine.approval_question import without_answer_line as without_answer_line  # library.py reads it here
from klaw.engine.approval_text import MAX_SHOWN_CHARS, duration_words
from klaw.engine.clock import Clock, monotonic
from klaw.engine.delivery import Delivery, Outbound
from klaw.engine.open_questions import OpenQuestions, not_run_unrecorded
from klaw.engine.settled_questions import SettledQuestions
from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)

# A tool held only for some arguments in some chat (schedule_add allowing held tools or reporting elsewhere)
Condition = Callable[[Mapping[str, Any], ChatRef], bool]
# What a yes grants, in plain words under the arguments (schedule_add's allow_tools: decision 525)
Grants = Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True)
class ApprovalScope:
    """Who answers for a turn: the person in its chat (`ask`), or nobody, in which case only the tools
    in `allowed` (a task created allowing them) run without asking. A subagent spawned from a chat asks
    in that chat (`ask_in`), its question saying who wants the call (`asker`: "the subagent 'x'")."""

    ask: bool = False
    allowed: frozenset[str] = frozenset()
    ask_in: ChatRef | None = None
    asker: str | None = None
    task: str | None = None  # the spawned run's task: its answer is what an approval unblocks (`questions`)


PERSON_PRESENT = ApprovalScope(ask=True)
NOBODY = ApprovalScope()


@dataclass(frozen=True)
class Verdict:
    """What became of a held call: its decision and, unless approved, the result the model reads."""

    decision: Decision
    message: str = ""

    @property
    def approved(self) -> bool:
        return self.decision is Decision.APPROVED


@dataclass
class _Pending:
    id: str
    chat: ChatRef
    tool: str
    answer: asyncio.Future[bool]
    call: ToolCall
    asked_at: float  # on the clock the timeout runs on (clock.py's monotonic): the time left counts from here
    after: str | None = None  # "answer"/"restart": asked with no message of the person's since their answer/the start
    noted_in: ChatRef | None = None  # the turn's chat, where the call is noted (a subagent's run), if not `chat`
    asker: str | None = None  # who wants the call when not the chat's own agent (a spawned subagent, decision 525)
    task: str | None = None  # the spawned run's task, for a subagent's question
    answered_from: ChatRef | None = None  # the chat whose /approve or /deny answered it (another owner's: 525)
    decision: Decision | None = None  # set once it is over
    refused: Decision | None = None  # not run, not by the person's /deny: NO_TERMINAL, NO_APPROVER, UNRECORDED
    said: str | None = None  # what the model reads instead of `outcome_text`'s words (NO_APPROVER's)
    over: asyncio.Event = field(default_factory=asyncio.Event)


class ApprovalGate:
    """The held tools, the questions waiting for an answer, and the `/approve` and `/deny` commands."""

    def __init__(
        self,
        *,
        tools: Collection[str],
        timeout_seconds: float,
        clock: Clock,
        delivery: Delivery,
        conditions: Mapping[str, Condition] | None = None,
        grants: Mapping[str, Grants] | None = None,
        noted: OpenQuestions | None = None,  # the open questions on disk, for a start after a kill (decision 447)
        declared: Callable[[], Collection[str]] | None = None,
    ) -> None:
        """`tools`: tools.approval; `declared`: the tools held because their authors declared they need approval
        (less tools.approvalWaived), asked at each call since groups and servers join the registry later."""
        self.noted = noted or OpenQuestions(None)
        self._tools = frozenset(tools)
        self._declared = declared or tuple
        self._timeout = timeout_seconds
        self._clock = clock
        self._delivery = delivery
        self._conditions = dict(conditions or {})
        self._grants = dict(grants or {})
        self._pending: dict[str, _Pending] = {}
        self.settled = SettledQuestions(timeout_seconds)  # how each ended, for a prompt that did not answer (450)
        self.stopping = False  # closed by the shutdown: held calls denied, and their turns end there (454)
        # Each chat's last word from its person since the start: "answer" (/approve, /deny) or "message" (436, 442)
        self._last_word: dict[ChatRef, str] = {}
        self._pipes_left: dict[ChatRef, Callable[[], bool]] = {}  # a gone pipe's chat, while its turns run (521)

    @property
    def tools(self) -> frozenset[str]:
        """Every held tool: tools.approval's, and those their authors declared (decision 540)."""
        return self._tools | frozenset(self._declared())

    def holds(self, call: ToolCall, chat: ChatRef) -> bool:
        """Whether `call`, made in `chat`, waits for the person: its tool is held (`tools.approval`), or a
        condition holds it for these arguments there, whatever `tools.approval` says."""
        if call.name in self.tools:
            return True
        condition = self._conditions.get(call.name)
        if condition is None:
            return False
        arguments = call_arguments(call.arguments)
        # Arguments that do not parse fail validation in the registry; held anyway, to be safe.
        return arguments is None or condition(arguments, chat)

    async def check(self, call: ToolCall, chat: ChatRef, scope: ApprovalScope) -> Verdict | None:
        """None: the call is not held and runs. Else the verdict, asking the person if there is one (the
        turn holds no LLM slot meanwhile: it holds one around a model call alone, decision 297)."""
        if not self.holds(call, chat):
            return None
        if not scope.ask:
            if call.name in scope.allowed:
                log.info("approval: %s allowed without asking in %s (its task allows it)", call.name, chat)
                return Verdict(Decision.APPROVED)
            log.info("approval: %s denied in %s: nobody to ask", call.name, chat)
            return Verdict(
                Decision.NO_PERSON,
                f"Not run: {call.name} needs the person's approval, and a scheduled task's run has nobody to ask."
                f" A task may use it only if it was created allowing it (schedule_add allow_tools, asked of the"
                f" person; or `klaw schedule add --allow-tool {call.name}`).",
            )
        if self.stopping:
            return Verdict(Decision.UNAVAILABLE, f"Not run: {call.name} needs approval and the engine is stopping.")
        length = len(shown_arguments(call))
        if length > MAX_SHOWN_CHARS:  # a question that shows part of a call would ask for what is not read
            log.info("approval: %s refused in %s: %d characters to show", call.name, chat, length)
            return Verdict(
                Decision.TOO_LONG,
                f"Not run: {call.name} needs the person's approval, and its arguments are too long to show them"
                f" whole ({length} characters as shown; at most {MAX_SHOWN_CHARS}). Make smaller calls (a file"
                f" written in parts, a script saved to a file first), each short enough to be read before it runs.",
            )
        return await self._ask(call, chat, scope)

    async def _ask(self, call: ToolCall, turn_chat: ChatRef, scope: ApprovalScope) -> Verdict:
        chat = scope.ask_in or turn_chat  # a spawned subagent asks the chat that spawned it (decision 525)
        if self._pipe_left(chat):  # nobody is there to ask: not asked, nor left open for the timeout (521)
            log.info("approval: %s in %s not asked: the piped klaw chat that sent its message left", call.name, chat)
            return Verdict(Decision.NO_TERMINAL, outcome_text(Decision.NO_TERMINAL, call.name, self._timeout))
        request_id = self._new_id()
        asked = question(request_id, call, self._timeout, asker=scope.asker, grants=self._granted(call))
        answer = asyncio.get_running_loop().create_future()
        after = None if (last := self._last_word.get(chat, "restart")) == "message" else last
        pending = _Pending(request_id, chat, call.name, answer, call, monotonic(self._clock), after, turn_chat)
        pending.asker, pending.task = scope.asker, scope.task
        await self.noted.ask(turn_chat, call.id)  # before the question: a kill -9 from here on leaves it never approved
        self._pending[pending.id] = pending
        cut_off = False
        try:
            try:
                await self._delivery.deliver(Outbound(chat, asked, kind="notice", approval=pending.id))
            except Exception as exc:  # no way to ask is no approval
                log.warning("approval %s: could not ask in %s: %s", pending.id, chat, type(exc).__name__)
                return Verdict(
                    Decision.UNAVAILABLE, f"Not run: {call.name} needs approval, and the question could not be sent."
                )
            log.info("approval %s: %s waits for the person in %s", pending.id, call.name, chat)
            decision = pending.decision = await self._wait(pending)
        except asyncio.CancelledError:  # cut off at its question (the loop torn down, a /stop): never approved,
            cut_off = True  # so still noted; taken out, a start told it as "may or may not have taken effect" (463)
            raise
        finally:
            self.settled.note(pending.id, chat, call.name, pending.decision.value if pending.decision else None)
            self._pending.pop(pending.id, None)
            recorded = cut_off or await self.noted.close(turn_chat, call.id)  # before an approved call runs
            pending.over.set()
        decision = Decision.UNRECORDED if decision is Decision.APPROVED and not recorded else decision  # 453, 466
        log.info("approval %s: %s in %s %s", pending.id, call.name, chat, decision.value)
        return Verdict(decision, outcome_text(decision, call.name, self._timeout, pending.said))

    async def _wait(self, pending: _Pending) -> Decision:
        timer = asyncio.ensure_future(self._clock.sleep(self._timeout))
        waiters: set[asyncio.Future[Any]] = {pending.answer, timer}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if not pending.answer.done():
            pending.answer.cancel()
            return Decision.TIMED_OUT
        if pending.answer.cancelled():
            return Decision.UNAVAILABLE
        return Decision.APPROVED if pending.answer.result() else pending.refused or Decision.DENIED

    def _granted(self, call: ToolCall) -> str | None:
        said = self._grants.get(call.name)
        arguments = call_arguments(call.arguments) if said is not None else None
        return None if said is None or arguments is None else said(arguments)

    def _new_id(self) -> str:
        while True:
            candidate = secrets.token_hex(2)  # four hex digits: short to type, unique among the waiting
            if candidate not in self._pending:
                return candidate

    def waiting(self, chat: ChatRef) -> list[str]:  # the ids of the questions waiting in `chat`, oldest first
        return [p.id for p in self._pending.values() if p.chat == chat and not p.answer.done()]

    def describe_waiting(self, chat: ChatRef) -> str:
        """`3f2a (host_exec), 09bc (schedule_add)` or `none`, for /status."""
        return ", ".join(f"{i} ({self._pending[i].tool})" for i in self.waiting(chat)) or "none"

    def questions(self, chat: ChatRef) -> list[dict[str, str]]:
        """The questions waiting in `chat`, oldest first (`id`, `tool`, `text`): the `approvals` query, so a
        web page (re)loaded while one waits shows it with its buttons, and a script whose wait ended with no
        reply learns what holds the chat (decision 359). Each says the time left to answer, not the whole
        timeout it was asked with (fh9: a page reloaded four minutes in still said "within 5 minutes")."""
        now = monotonic(self._clock)
        waiting = [p for p in self._pending.values() if p.chat == chat and not p.answer.done()]
        return [
            {
                **({} if p.task is None else {"task": p.task}),  # a subagent's: its run's answer follows (525)
                "id": p.id,
                "tool": p.tool,
                "text": question(
                    p.id,
                    p.call,
                    self._timeout,
                    waited=timedelta(seconds=now - p.asked_at),
                    asker=p.asker,
                    grants=self._granted(p.call),
                ),
            }
            for p in waiting
        ]

    async def ended(self, request_id: str) -> str | None:
        """Wait until question `request_id` is over, and say how when it was not the person's own answer:
        `klaw chat` ends its `approve? [y/N]` prompt with this line at the timeout, instead of keeping it
        up for an answer nobody waits for any more (decision 360). None: the person answered it."""
        pending = self._pending.get(request_id)
        if pending is None:
            return f"No approval request {request_id!r} is waiting any more: its call was not run."
        await pending.over.wait()
        if pending.decision is Decision.TIMED_OUT:
            return f"No answer within {duration_words(self._timeout)}: {pending.tool} was not run."
        elsewhere = pending.answered_from not in (None, pending.chat)  # another of the owner's chats (525)
        if elsewhere and pending.decision in (Decision.APPROVED, Decision.DENIED):
            verb, then = ("approve", "runs") if pending.decision is Decision.APPROVED else ("deny", "will not run")
            said = f"/{verb} {request_id}, so {pending.tool} {then}"
            return f"Answered in {pending.answered_from}, not at this prompt: {said}."
        if pending.decision in (Decision.APPROVED, Decision.DENIED, Decision.NO_TERMINAL):
            return None
        return f"Not run: klaw stopped before you answered about {pending.tool}; your message is answered again."

    def over(self, chat: ChatRef, request_id: str) -> str | None:  # the `approval_over` query (decision 450)
        """None while question `request_id` waits (or is being ended); else how it ended, in `settled`'s words."""
        return None if request_id in self._pending else self.settled.said(chat, request_id)

    def handlers(self) -> dict[str, Callable[[ChatRef, str], Awaitable[str]]]:
        """`/approve [ID]` and `/deny [ID]` for the command handler."""

        async def approve(chat: ChatRef, args: str) -> str:
            return self.answer(chat, args, approved=True)

        async def deny(chat: ChatRef, args: str) -> str:
            return self.answer(chat, args, approved=False)

        return {"approve": approve, "deny": deny}

    def heard(self, chat: ChatRef) -> None:  # a message: a bare /approve may answer the questions after it
        self._last_word[chat] = "message"
        self._pipes_left.pop(chat, None)  # someone writes here again: asked as any (decision 521)

    def answer(self, chat: ChatRef, args: str, *, approved: bool) -> str:
        """The person's answer: from the chat that was asked, or another of the owner's own (console, web:
        approval_elsewhere.py, decision 525); no id is fine when one question waits in this chat."""
        verb = "approve" if approved else "deny"
        waiting = self.waiting(chat)
        words = args.split()
        if not words:
            if len(waiting) != 1:
                others = [(p.id, p.tool, p.chat) for p in self._pending.values() if not p.answer.done()]
                return which(verb, chat, waiting, others)
            if (only := self._pending[waiting[0]]).after is not None:
                return _new_question(verb, only)
            request_id = only.id
        elif len(words) == 1:
            request_id = words[0].lower()
        else:
            return f"Usage: /{verb} ID (the id the question gave)."
        pending = self._pending.get(request_id)
        if pending is not None and not pending.answer.done() and not may_answer(pending.chat, chat):
            if (there := waits_there(pending.id, pending.tool, pending.chat, chat)) is not None:
                return there
            pending = None
        if pending is None or pending.answer.done():
            said = f"No approval request {request_id!r} is waiting in this chat (answered, timed out, or never asked)."
            return f"{said} {which(verb, chat, waiting)}" if waiting else said
        # Noted still: a kill would say never approved
        if approved and not self.noted.over(pending.noted_in or pending.chat, pending.call.id):
            pending.refused, approved = Decision.UNRECORDED, False
        pending.answered_from = chat
        pending.answer.set_result(approved)
        self._last_word[chat] = self._last_word[pending.chat] = "answer"
        self._pipes_left.pop(pending.chat, None)
        if pending.refused is Decision.UNRECORDED:
            return not_run_unrecorded(pending.tool)
        where = "" if pending.chat == chat else f" (asked in {pending.chat})"
        return (
            f"Approved{where}: {pending.tool} runs now." if approved else f"Denied{where}: {pending.tool} will not run."
        )

    def nobody_can_answer(self, chat: ChatRef, request_id: str) -> str:
        """End question `request_id` unrun because no one can answer it (`echo … | klaw chat`: no terminal).
        The model is told that, not that the person denied the call (newcomer10: it then told the person
        they had refused what they never saw), so it can say how to allow it."""
        pending = self._pending.get(request_id)
        if pending is None or pending.chat != chat or pending.answer.done():
            return f"No approval request {request_id!r} is waiting in this chat."
        pending.refused = Decision.NO_TERMINAL
        pending.answer.set_result(False)
        return (
            f"Not run: {pending.tool} needs your approval (tools.approval), and a piped klaw chat has no"
            " terminal to ask you in; run klaw chat in a terminal to approve it."
        )

    def no_approver(self, chat: ChatRef, request_id: str, said: Callable[[str], str]) -> None:
        """End question `request_id` unrun because the program's `Klaw` cannot answer it (no approve= callback,
        or it raised): the model reads `said(tool)`, "nobody was asked", not a denial (decision 538)."""
        pending = self._pending.get(request_id)
        if pending is not None and pending.chat == chat and not pending.answer.done():
            pending.refused, pending.said = Decision.NO_APPROVER, said(pending.tool)
            pending.answer.set_result(False)

    def pipe_left(self, chat: ChatRef, before: Collection[str], under_way: Callable[[], bool]) -> None:
        """A piped `klaw chat`'s connection closed (killed, or done): the questions asked in its chat since it came
        (not `before`) are ended as nobody can answer them, and so is any its chat's turns ask while `under_way`,
        until someone writes or answers there again (decision 521). A terminal's attached chat never says it is
        piped: its questions wait as before."""
        for request_id in self.waiting(chat):
            if request_id not in before:
                self.nobody_can_answer(chat, request_id)
        self._pipes_left[chat] = under_way

    def _pipe_left(self, chat: ChatRef) -> bool:
        under_way = self._pipes_left.get(chat)
        if under_way is not None and not under_way():
            del self._pipes_left[chat]  # its chat's turns are over: a later message is asked as any
            return False
        return under_way is not None

    def waiting_chats(self) -> set[ChatRef]:  # the chats a question waits in: a stop cuts their turns (513)
        return {p.chat for p in self._pending.values() if not p.answer.done()}

    def close(self, cut: Collection[ChatRef] = ()) -> None:
        """Stopping: deny what waits, but a question of a turn in `cut` (cancelled, left noted: asked again, 513)."""
        self.stopping = True
        for pending in self._pending.values():
            # A subagent's question is not its chat's turn's: its run is not cut, so it is denied (decision 525)
            if not pending.answer.done() and (pending.chat not in cut or pending.asker is not None):
                pending.answer.cancel()


def _new_question(verb: str, pending: _Pending) -> str:  # a double tap would answer it unread (adversary23)
    came = "after your last answer" if pending.after == "answer" else "since klaw restarted, before you wrote here"
    return (  # a tap sent as klaw restarted may arrive after the start's first questions (decision 442)
        f"Not answered: a new question ({pending.tool}, {pending.id}) came {came}, so a bare /{verb} may be"
        f" a second tap meant for an earlier one. Read it, then answer /{verb} {pending.id}."
    )
