"""Where replies go: a sink per channel (the in-process console), else a fallback (the socket).
A library program asking in another channel's chat (`ask("web:main", …)`) gets the replies to its own
messages only (`answer_asks`); the rest of that channel keeps its route (decision 465), and the web page is
sent those replies too (`SHOWN_WHOLE`, decision 473).

The processor only says "deliver this to that chat"; the runtime decides how each channel is
reached, so the same engine serves `klaw chat` in one process and gateways over the socket.
A reply can also be streamed while the model writes it (`delta_sink`), to a channel whose gateway
asked for it; the complete reply is still delivered as usual afterwards.

A turn's reply, and a message the agent sends unasked (a task's answer), carries its record id: the
store keeps it as undelivered until it is confirmed (an
in-process sink returned, or a gateway sent `delivered`), and the engine sends what is left again
at start (docs/decisions/101-reply-redelivery.md). An in-process sink's confirmation is written just
after the turn, beside the next one (decision 229).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord

log = logging.getLogger(__name__)

SHOWN_WHOLE = frozenset({"web"})
"""Channels whose gateway shows a chat's whole history (the web page): a reply to a program's `ask` there goes
to the program and to the channel's route, so an open page shows it, and reads the message it answers from the
history, as it does for another tab's (decision 473; before, only after a reload). Its pieces stay the
program's. Another channel's person (Telegram, a piped `klaw chat`) would get a reply to a message never sent
from there: not routed."""

OutboundKind = Literal["reply", "notice", "error"]


@dataclass(frozen=True)
class Outbound:
    chat: ChatRef
    text: str
    reply_to: str | None = None
    kind: OutboundKind = "reply"
    task: str | None = None  # the scheduled task whose answer this is
    spawned: bool = False  # that task is a one-off subagent run (subagent_spawn), labelled so
    sent_from: str | None = None  # written in another chat (message_send): that chat, "web:main"
    approval: str | None = None  # a question of engine/approval.py: the id `/approve` and `/deny` take
    id: str | None = None  # a turn's reply: its record id, kept to send again until a channel confirms it
    # a turn's reply or apology: the ids of every message its turn answered (one turn may join several,
    # asked through several engines sharing a store); `reply_to` is the last of them
    answers: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # a turn's reply: its tool calls in order, bounded (tools_used.tool_runs)
    forgotten: bool = False  # a notice after a forget: channels drop the copies of the chat they keep
    # a failed turn's apology: the id its log lines name, and the exception that ended the turn; in this
    # process only (the library's `TurnFailed` carries them), never sent to a gateway or stored
    error_id: str | None = None
    cause: Exception | None = field(default=None, compare=False)


def kept_reply(record: MessageRecord, reply_to: str | None) -> Outbound:
    """A reply the store keeps until a channel confirms it (a turn's, or one the agent sent unasked:
    `exchange_records.sent_unasked`), under its record id so a gateway shows it once however often it
    is sent; a task's answer, or a message written in another chat, keeps its label when sent again at start."""
    metadata = record.metadata or {}
    task = metadata.get("task") if metadata.get("source") == "task" else None
    sent_from = metadata.get("from") if metadata.get("source") == "message_send" else None
    return Outbound(
        record.chat,
        record.content,
        reply_to,
        "reply",
        task=task if isinstance(task, str) else None,
        spawned=metadata.get("origin") == "spawn",
        sent_from=sent_from if isinstance(sent_from, str) else None,
        id=record.id,
    )


Sink = Callable[[Outbound], Awaitable[None]]
TextSink = Callable[[str], Awaitable[None]]
Streamer = tuple[Callable[[str], bool], Sink]  # (does the channel's gateway want deltas now, send one)
PickStream = Callable[[ChatRef, str | None], TextSink | None]  # an in-process channel's: who reads this turn's pieces
Confirm = Callable[[Sequence[str]], Awaitable[int]]  # these replies were shown: stop keeping them to resend
Asked = Callable[[ChatRef], Collection[str]]  # an in-process caller's messages in the chat whose replies it waits for


class Delivery:
    """`fallback`: where a channel without an in-process sink is reached (the socket), None for nowhere;
    `streamer`: (does that channel's gateway want deltas now, write one best effort), or None."""

    def __init__(
        self,
        *,
        fallback: Sink | None = None,
        streamer: Streamer | None = None,
        served: Callable[[str], bool] | None = None,
        confirm: Confirm | None = None,
    ) -> None:
        """`served`: whether a gateway serves a channel now (the socket's routes), for `reachable`;
        `confirm`: how replies shown are no longer kept to send again (the store)."""
        self._sinks: dict[str, Sink] = {}
        self._fallback = fallback
        self._served = served
        self._confirm = confirm
        self._wants_stream: Callable[[str], bool] | None = None
        self._stream: Sink | None = None
        if streamer is not None:
            self._wants_stream, self._stream = streamer
        self._picks: dict[str, PickStream] = {}  # in-process channels that stream (the library's `stream`)
        self._to_confirm: list[str] = []  # shown by an in-process channel, not yet written as confirmed
        self._confirming: asyncio.Task[None] | None = None
        self._asker: tuple[Asked, Sink, PickStream] | None = None

    def register(self, channel: str, sink: Sink) -> None:
        """An in-process channel (the console of `klaw chat`, a library caller) gets its replies here."""
        self._sinks[channel] = sink

    def stream_in_process(self, channel: str, pick: PickStream) -> None:
        """An in-process channel's turns are streamed to what `pick(chat, reply_to)` gives (None: not this one)."""
        self._picks[channel] = pick

    def answer_asks(self, asked: Asked, sink: Sink, pick: PickStream) -> None:
        """A caller in this process asking in chats of channels it does not own (the library's
        `ask("web:main", …)`): the replies to its messages (`asked(chat)`), their pieces (`pick`) and a
        question to approve a tool in a chat where it waits go to `sink`; everything else of those
        channels keeps its route, the gateway's (decision 465: it used to take the whole channel)."""
        self._asker = (asked, sink, pick)

    def _in_process(self, outbound: Outbound) -> tuple[Sink | None, bool]:
        """The in-process sink `outbound` goes to, if any, and whether its channel's route gets it too: a
        turn that answered an asker's message and another's together (a page's, joined in one debounce)."""
        sink = self._sinks.get(outbound.chat.channel)
        if sink is not None or self._asker is None:
            return sink, False
        asked, asker, _ = self._asker
        mine = set(asked(outbound.chat))
        if mine and outbound.approval is not None:
            return asker, False
        answers = {outbound.reply_to, *outbound.answers} - {None}
        shown_whole = outbound.chat.channel in SHOWN_WHOLE  # the open page shows it too (decision 473)
        return (asker, shown_whole or not answers <= mine) if answers & mine else (None, False)

    def unregister(self, channel: str, sink: Sink) -> None:
        if self._sinks.get(channel) is sink:
            del self._sinks[channel]

    def reachable(self, channel: str) -> bool:
        """Whether a message to `channel` reaches it now (an in-process sink, or a gateway serving it)."""
        return channel in self._sinks or (self._served is not None and self._served(channel))

    @property
    def can_queue(self) -> bool:
        """Whether a message to a channel nobody serves now waits for one (the socket queues it)."""
        return self._fallback is not None

    def set_fallback(self, sink: Sink) -> None:
        """Tests only: catch every reply of channels without a sink."""
        self._fallback = sink

    def delta_sink(self, chat: ChatRef, reply_to: str | None) -> TextSink | None:
        """Where to send pieces of the reply to `reply_to` as they are written, or None: no streaming."""
        if chat.channel in self._sinks:  # in process: streamed only when a reader waits for this turn's pieces
            pick = self._picks.get(chat.channel)
            return None if pick is None else pick(chat, reply_to)
        if self._asker is not None and reply_to in self._asker[0](chat):  # an asker's: never the gateway's
            return self._asker[2](chat, reply_to)
        stream, wants = self._stream, self._wants_stream
        if stream is None or wants is None or chat.channel in self._sinks or not wants(chat.channel):
            return None

        async def send(text: str) -> None:
            try:
                await stream(Outbound(chat, text, reply_to, "reply"))
            except Exception as exc:  # a lost delta must never fail the turn: the whole reply follows
                log.debug("delta for %s not sent: %s", chat, type(exc).__name__)

        return send

    async def deliver(self, outbound: Outbound) -> None:
        """Hand the reply to its channel. An in-process sink has shown it when it returns, so a reply with
        an id is confirmed at once; through the socket the gateway confirms it (`confirmed`)."""
        in_process, routed_too = self._in_process(outbound)
        sink = in_process or self._fallback
        if sink is None:
            log.warning("no route for channel %s; a %s was not delivered", outbound.chat.channel, outbound.kind)
            return
        await sink(outbound)
        if routed_too and self._fallback is not None:
            await self._fallback(outbound)
        if in_process is not None and outbound.id is not None:
            self._confirm_soon(outbound.id)

    def has_in_process(self, channel: str) -> bool:
        """Whether replies in `channel` may go to a caller in this process (its sink, or an asker's)."""
        return channel in self._sinks or self._asker is not None

    async def deliver_in_process(self, outbound: Outbound) -> bool:
        """Hand it to the channel's in-process sink only (a library caller waiting for its reply), never
        to the socket: for a reply another engine's turn wrote, which that engine delivered to gateways
        and keeps to send again itself. False when the channel has no in-process sink here."""
        sink, _ = self._in_process(outbound)
        if sink is None:
            return False
        await sink(outbound)
        return True

    def _confirm_soon(self, record_id: str) -> None:
        """Note the reply as shown after the turn, not in it (decision 229): the chat's next turn and the
        model slot do not wait for that write, and the confirmations that come meanwhile go in one.
        Losing one to a crash only offers that reply once more at the next start (decision 101)."""
        if self._confirm is None:
            return
        self._to_confirm.append(record_id)
        if self._confirming is None or self._confirming.done():
            self._confirming = asyncio.create_task(self._write_confirms(), name="klaw-confirm-replies")

    async def _write_confirms(self) -> None:
        while self._to_confirm:
            record_ids, self._to_confirm = self._to_confirm, []
            try:
                await self.confirmed(record_ids)
            except Exception as exc:  # a full disk: the replies stay kept, offered again at the next start
                log.warning("%d reply(ies) shown but not noted as shown: %s", len(record_ids), type(exc).__name__)

    async def settle(self) -> None:
        """Until the confirmations under way are written: before the store closes."""
        while self._confirming is not None and not self._confirming.done():
            await asyncio.wait([self._confirming])

    async def confirmed(self, record_ids: Sequence[str]) -> None:
        """These replies were shown (a gateway's `delivered` frame): they are not sent again at start."""
        if self._confirm is not None:
            await self._confirm(record_ids)


async def redeliver(store: Storage, delivery: Delivery, cutoff: datetime) -> int:
    """Send again the replies no channel confirmed (the engine stopped between closing their
    exchange and a gateway showing them); returns how many. Each goes under its record id, so a
    gateway that did show it shows it once. One older than `cutoff` is given up: a person who
    waited that long has moved on, and a gateway too old to confirm must not get every reply
    again at each start."""
    waiting = await store.exchanges.undelivered()
    stale = [u.reply.id for u in waiting if u.reply.created_at < cutoff]
    await store.exchanges.mark_delivered(stale)
    sent = 0
    for item in waiting:
        if item.reply.created_at >= cutoff:
            await delivery.deliver(kept_reply(item.reply, item.reply_to))
            sent += 1
    # Sending again is recovery working (info); a reply given up is one a person never saw (warning).
    if sent:
        log.info("sending again %d reply(ies) no chat had shown when the engine last stopped", sent)
    if stale:
        log.warning(
            "%d reply(ies) written before %s UTC were never shown (the engine stopped first) and are too old"
            " to send now; they are in the chat's history",
            len(stale),
            f"{cutoff:%Y-%m-%d %H:%M}",
        )
    return sent
