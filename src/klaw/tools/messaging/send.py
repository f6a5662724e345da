"""`message_send(target, text)`: a message from the agent to another chat, e.g. from the web page to the
person's Telegram (docs/decisions/108-message-send.md).

Only the person's own chats are targets unless `tools.messageTargets` says otherwise: the chats of the
configured channels' allow-lists, `web:main` and the console; anything else is refused with a reason
the model can read and act on ("ask the person to add it to tools.messageTargets"). The tool decides
where a message may go; the engine (its `MessageSender`) records it in the target chat's log, marked as
the agent's, and delivers it. How many it may send, per turn and per target chat an hour, is
`SendLimits`' (limits.py, decision 389), the hour's counted in the store (decision 418). Nothing of the text is logged.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Protocol

from pydantic import AfterValidator, Field

from klaw.config import EngineConfig
from klaw.scheduling.names import parse_chat_target
from klaw.store.records import ChatRef
from klaw.store.send_protocol import SendRepository
from klaw.tools.calls import ToolRefusal
from klaw.tools.messaging.limits import SendLimits
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

MAX_MESSAGE_CHARS = 8000
WEB_CHAT = ChatRef("web", "main")
CONSOLE_CHANNEL = "console"


class Sent(StrEnum):
    DELIVERED = "delivered"  # recorded and handed to the channel now
    QUEUED = "queued"  # recorded; no gateway serves the channel now: delivered when one connects
    AFTER_TURN = "after_turn"  # the target chat is in a turn: recorded and delivered when it ends
    UNREACHABLE = "unreachable"  # nothing can reach the channel from this engine: nothing recorded


class MessageSender(Protocol):
    """The engine's side: record `text` in `target`'s log as the agent's message and deliver it."""

    async def send(self, source: ChatRef, target: ChatRef, text: str) -> Sent: ...

    def reaches(self, target: ChatRef) -> bool:
        """Whether `send` to `target` would record anything now (False: it would answer UNREACHABLE)."""
        ...


def unreachable_words(chat: ChatRef) -> str:
    """What the model is told when nothing can reach `chat` from this engine (nothing was sent)."""
    if chat.channel == CONSOLE_CHANNEL:
        return (
            f"nothing was sent: {chat} is the terminal of `klaw chat`, and no klaw chat runs with this"
            " engine; write to the web page or Telegram instead"
        )
    return (
        f"nothing was sent: no channel {chat.channel!r} is running with this engine"
        " (klaw serve or klaw gateway runs the web page and Telegram)"
    )


def own_chats(config: EngineConfig) -> frozenset[ChatRef]:
    """The person's own chats, the default targets: the web page's chat (when the page is on), the
    Telegram chats of the allow-list (when Telegram is on) and this user's console chat."""
    chats = {ChatRef(CONSOLE_CHANNEL, getpass.getuser() or "local")}
    if config.channels.web.enabled:
        chats.add(WEB_CHAT)
    if config.channels.telegram.enabled:
        chats.update(ChatRef("telegram", str(chat_id)) for chat_id in config.channels.telegram.allowed_chat_ids)
    return frozenset(chats)


def message_targets(config: EngineConfig) -> frozenset[ChatRef]:
    """`tools.messageTargets` when set (exactly those chats), else the person's own chats."""
    if config.tools.message_targets is None:
        return own_chats(config)
    return frozenset(parse_chat_target(target) for target in config.tools.message_targets)


def target_problem(chat: ChatRef, targets: Iterable[ChatRef]) -> str | None:
    """Why the agent may not write to `chat` (not among `targets`), or None: the one rule for
    `message_send` and for where a task it schedules reports (`schedule_add`'s `inject_into`)."""
    allowed = frozenset(targets)
    if chat in allowed:
        return None
    listed = ", ".join(sorted(str(target) for target in allowed)) or "none"
    return (
        f"{chat} is not one of the person's chats this agent may write to (allowed: {listed});"
        " the person can add it to tools.messageTargets in engine.yaml, then restart klaw"
    )


def send_limits(config: EngineConfig, places: SendRepository) -> SendLimits:
    """The caps of `tools.messageSendsPerTurn` and `tools.messageSendsPerChatPerHour`, the hour's sends
    counted in `places` (the store's `sends`)."""
    return SendLimits(config.tools.message_sends_per_turn, config.tools.message_sends_per_chat_per_hour, places)


def register_message_tools(
    registry: ToolRegistry, sender: MessageSender, targets: Iterable[ChatRef], limits: SendLimits
) -> None:
    allowed = frozenset(targets)
    listed = ", ".join(sorted(str(chat) for chat in allowed)) or "none"

    def reachable(target: str) -> ChatRef:
        """The target chat, or ValueError saying why it may not be written to."""
        try:
            chat = parse_chat_target(target)
        except ValueError as exc:
            raise ValueError(f"{exc}; allowed targets: {listed}") from None
        if (problem := target_problem(chat, allowed)) is not None:
            raise ValueError(problem)
        return chat

    def allowed_target(target: str) -> str:
        # Checked as the arguments are validated, so a call that could never be sent is refused before
        # `tools.approval` asks the person about it (a prompt injection's target, say; or the console
        # while no `klaw chat` runs: asked the engine's own question, `sender.reaches`).
        if not sender.reaches(chat := reachable(target)):
            raise ValueError(unreachable_words(chat))
        return target

    async def message_send(context: ToolContext, target: str, text: str) -> str:
        """Send text to another of the person's chats."""
        try:
            chat = reachable(target)
        except ValueError as exc:
            raise ToolRefusal(str(exc)) from None
        if chat == context.chat:
            raise ToolRefusal("that is this chat: answer here instead of sending")
        if not text.strip():
            raise ToolRefusal("the text is empty")
        if len(text) > MAX_MESSAGE_CHARS:
            raise ToolRefusal(f"the text has {len(text)} characters; send at most {MAX_MESSAGE_CHARS} at a time")
        async with limits.reserve(context, chat) as place:
            sent = await sender.send(context.chat, chat, text)
            if sent is Sent.UNREACHABLE:
                place.reached_nobody()
        if sent is Sent.UNREACHABLE:  # the terminal left between the check and the send
            raise ToolRefusal(unreachable_words(chat))
        return {
            Sent.DELIVERED: f"Sent to {chat}.",
            Sent.QUEUED: f"Recorded in {chat}, but no gateway serves {chat.channel} right now: it is delivered when"
            " one connects (within an hour, even if the engine restarts meanwhile; later, it stays only in that"
            " chat's history).",
            Sent.AFTER_TURN: f"{chat} is in the middle of a turn: the message is recorded there and delivered as soon"
            " as that turn ends.",
        }[sent]

    # The validator closes over the allowed chats, so the annotation is an object, not a string (this
    # module's annotations are strings, resolved in its globals, where `allowed_target` is not).
    message_send.__annotations__["target"] = Annotated[
        str, AfterValidator(allowed_target), Field(description="channel:chat_id")
    ]
    registry.register(message_send)
