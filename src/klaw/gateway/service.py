"""`Gateway`: the channels, the durable buffer and the engine link, run together (`klaw gateway`).

A channel hands over what a person typed with `submit`: slash text becomes a `command` frame, the
rest an `inbound` frame; either is buffered on disk before `submit` returns, then sent when the
engine is there. What the engine sends back is routed by channel name to the channel's `deliver`
(a finished reply, notice or error) or `delta` (a piece of a reply being written), through one queue
per channel so a slow channel (a Telegram API call) never holds up the others or the link. A turn's
reply carries an id: once its channel has shown it the gateway confirms it (`delivered`), and a reply
the engine sends again after a restart is shown once (docs/decisions/101-reply-redelivery.md); one
sent in parts, as too large for a frame, is joined and shown whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from klaw.command_syntax import parse_command
from klaw.engine.clock import Clock, SystemClock
from klaw.engine.frames import (
    CommandFrame,
    DeltaFrame,
    ErrorFrame,
    FrameError,
    InboundFrame,
    OutboundFrame,
    describe_invalid,
)
from klaw.gateway.buffer import BufferedFrame, InboundBuffer
from klaw.gateway.link import Backoff, EngineLink
from klaw.home import KlawHome

log = logging.getLogger(__name__)

SHOWN_REMEMBERED = 4096
"""Replies remembered as shown, to show a reply sent again by a restarted engine only once: far more
than the replies one engine start sends again (those of the last hour no channel confirmed)."""
PARTS_REMEMBERED = 64
"""Replies whose parts are still coming (a part whose reply the engine never finished, as it went down,
is dropped with the oldest): each is being written by the engine now, so a few at a time at most."""


class Channel(Protocol):
    """A way people reach the agent. `name` is the channel in frames; `streaming`: wants deltas."""

    @property
    def name(self) -> str: ...

    @property
    def streaming(self) -> bool: ...

    async def start(self, gateway: Gateway) -> None: ...

    async def stop(self) -> None: ...

    async def deliver(self, frame: OutboundFrame) -> None: ...

    async def delta(self, frame: DeltaFrame) -> None: ...


@dataclass(frozen=True)
class Submitted:
    """A message taken in: its id (replies name it in `reply_to`) and whether it waits for the engine."""

    id: str
    queued: bool
    duplicate: bool = False
    other_text: bool = False  # a duplicate whose pending frame holds other words: nothing was taken (decision 500)
    # with `verdict=True`, the engine's word on this frame: None once taken, its error if refused (decision 503)
    taken: asyncio.Future[ErrorFrame | None] | None = field(default=None, compare=False)


class Gateway:
    def __init__(
        self,
        home: KlawHome,
        channels: Sequence[Channel],
        *,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        buffer_dir: Path | None = None,
        watch_only: bool = False,
    ) -> None:
        """`buffer_dir`: where the inbound buffer lives, the home's gateway directory unless given (a
        `klaw chat` attached to a running engine keeps its own: console_attached.py). `watch_only`: the
        channels' replies are copies (`hello`'s `watching`), served and confirmed by another connection: a
        piped `klaw chat` beside an attached terminal (decision 527)."""
        self._watch_only = watch_only
        self.home = home
        self._buffer_dir = buffer_dir or home.gateway_dir
        self.channels = {channel.name: channel for channel in channels}
        self._clock = clock or SystemClock()
        self._backoff = backoff
        self._buffer: InboundBuffer | None = None
        self._link: EngineLink | None = None
        self._queues: dict[str, asyncio.Queue[OutboundFrame | DeltaFrame]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._started: list[Channel] = []
        self._shown: OrderedDict[str, None] = OrderedDict()  # ids of replies shown, newest last
        self._parts: OrderedDict[tuple[str, ...], list[str | None]] = OrderedDict()  # replies whose parts are coming
        self._verdicts: dict[int, tuple[BufferedFrame, asyncio.Future[ErrorFrame | None]]] = {}  # by id(frame)

    @property
    def link(self) -> EngineLink:
        if self._link is None:
            raise RuntimeError("the gateway is not started")
        return self._link

    @property
    def buffer(self) -> InboundBuffer:
        if self._buffer is None:
            raise RuntimeError("the gateway is not started")
        return self._buffer

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.connected.is_set()

    async def start(self) -> None:
        """Open the buffer, start the link (it connects in the background), then the channels."""
        self._buffer = await InboundBuffer.open(self._buffer_dir)
        names = list(self.channels)
        streaming = [name for name, channel in self.channels.items() if channel.streaming]
        self._link = EngineLink(
            self.home.socket_path,
            self._buffer,
            self._route,
            self._clock,
            channels=[] if self._watch_only else names,
            streaming=[] if self._watch_only else streaming,
            watching=names if self._watch_only else [],
            backoff=self._backoff,
            settled=self._settled,
        )
        for name in names:
            queue: asyncio.Queue[OutboundFrame | DeltaFrame] = asyncio.Queue()
            self._queues[name] = queue
            self._tasks.append(asyncio.create_task(self._dispatch(self.channels[name], queue), name=f"deliver-{name}"))
        self._tasks.append(asyncio.create_task(self._link.run(), name="engine-link"))
        for channel in self.channels.values():
            await channel.start(self)
            self._started.append(channel)

    def engine_stopping(self) -> None:
        """This process is stopping the engine itself (`klaw serve`): its going away is not an outage to
        report at WARNING."""
        self.link.outage.expect_stop()

    async def stop(self) -> None:
        """Stop the channels (no new messages), then the link; what is buffered stays for next time."""
        for channel in reversed(self._started):
            try:
                await channel.stop()
            except Exception as exc:
                log.error("channel %s failed to stop: %s", channel.name, type(exc).__name__)
        self._started.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def submit(
        self,
        channel: str,
        chat_id: str,
        text: str,
        *,
        message_id: str | None = None,
        sender: str | None = None,
        verdict: bool = False,
        whole: bool = False,
    ) -> Submitted:
        """Buffer what a person typed and send it when the engine is there. A `message_id` that is
        already pending is not buffered twice (`duplicate`). Raises `FrameError` for text too large or
        not valid (a lone surrogate, a chat id no log could be named after): the channel tells the person.
        `whole`: the message is all there is (a piped chat's): answered without the debounce (decision 520)."""
        frame_id = message_id or uuid.uuid4().hex
        command = parse_command(text)
        frame: BufferedFrame
        try:
            if command is not None:
                frame = CommandFrame(  # `text` as typed: a skill's call goes to the engine as the console's does
                    id=frame_id, channel=channel, chat_id=chat_id, command=command.name, args=command.args, text=text
                )
            else:
                frame = InboundFrame(
                    id=frame_id,
                    channel=channel,
                    chat_id=chat_id,
                    text=text,
                    created_at=self._clock.now(),
                    sender=sender,
                    whole=whole,
                )
        except ValidationError as exc:  # refused here, as the engine would (never buffered, never retried)
            raise FrameError("invalid_frame", describe_invalid(exc, "command" if command else "inbound")) from None
        taken: asyncio.Future[ErrorFrame | None] | None = None
        if verdict:  # before the add: the engine may take the frame before `add` returns
            taken = asyncio.get_running_loop().create_future()
            self._verdicts[id(frame)] = (frame, taken)
        held: BufferedFrame | None = None
        try:
            held = await self.buffer.add(frame)
        finally:
            if taken is not None and (held is not None or (not taken.done() and frame.id not in self.buffer)):
                self._verdicts.pop(id(frame), None)  # never buffered (a duplicate, a full disk): no verdict comes
                taken = None
        self.link.kick()
        other = held is not None and _words(held) != _words(frame)
        return Submitted(frame_id, queued=not self.connected, duplicate=held is not None, other_text=other, taken=taken)

    def _settled(self, frame: BufferedFrame, error: ErrorFrame | None) -> bool:
        """The link's word on a buffered frame: handed to the submitter waiting for it, if one still does."""
        _, taken = self._verdicts.pop(id(frame), (frame, None))
        if taken is None or taken.done():
            return False
        taken.set_result(error)
        return True

    async def query(self, name: str, params: dict[str, Any]) -> Any:
        """A read-only question to the engine (`EngineUnavailable` while it is down, `QueryFailed`)."""
        return await self.link.query(name, params)

    async def _route(self, frame: OutboundFrame | DeltaFrame) -> None:
        queue = self._queues.get(frame.channel)
        if queue is None:
            log.warning("engine sent a %s for channel %s, which this gateway does not run", frame.type, frame.channel)
            return
        queue.put_nowait(frame)

    async def _dispatch(self, channel: Channel, queue: asyncio.Queue[OutboundFrame | DeltaFrame]) -> None:
        while True:
            frame = await queue.get()
            if isinstance(frame, OutboundFrame) and frame.parts > 1:
                whole = self._joined(frame)
                if whole is None:  # more parts to come
                    continue
                frame = whole
            try:
                if isinstance(frame, DeltaFrame):
                    await channel.delta(frame)
                elif frame.id is None or self._watch_only:  # a copy: the connection serving it confirms it
                    await channel.deliver(frame)
                else:
                    await self._deliver_once(channel, frame, frame.id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("channel %s could not deliver a %s: %s", channel.name, frame.type, type(exc).__name__)
                log.debug("delivery traceback", exc_info=True)

    def _joined(self, frame: OutboundFrame) -> OutboundFrame | None:
        """A reply too large for one frame comes in parts (engine/frame_parts.py): the whole once its
        last part is here, else None. Channels get it whole: each used to show the first part as the
        reply (a piped `klaw chat` printed it and left, the web API returned it) and the rest went
        unseen though confirmed (decision 443). A restarted engine sends a reply again from part 0."""
        key = (
            (frame.id,) if frame.id is not None else (frame.chat_id, frame.kind, frame.reply_to or "", frame.task or "")
        )
        pieces = self._parts.get(key)
        if pieces is None or frame.part == 0 or len(pieces) != frame.parts:
            pieces = self._parts[key] = [None] * frame.parts
            while len(self._parts) > PARTS_REMEMBERED:
                self._parts.popitem(last=False)
        pieces[frame.part] = frame.text
        if any(piece is None for piece in pieces):
            return None
        del self._parts[key]
        return frame.model_copy(update={"text": "".join(piece or "" for piece in pieces), "part": 0, "parts": 1})

    async def _deliver_once(self, channel: Channel, frame: OutboundFrame, reply_id: str) -> None:
        """A reply the engine keeps until confirmed: shown once (the engine sends it again after a restart
        when the confirmation did not reach it), then confirmed."""
        if reply_id not in self._shown:
            await channel.deliver(frame)
            self._shown[reply_id] = None
            while len(self._shown) > SHOWN_REMEMBERED:
                self._shown.popitem(last=False)
        await self.link.confirm(reply_id)


async def run_until_stopped(gateway: Gateway, stop: asyncio.Event) -> None:
    """Start the gateway, wait for `stop`, stop it (what `klaw gateway` and `klaw serve` do)."""
    await gateway.start()
    try:
        await stop.wait()
    finally:
        with contextlib.suppress(Exception):
            await gateway.stop()


def _words(frame: BufferedFrame) -> tuple[str, ...]:
    """What a person sent in a frame, to tell a message sent again from another one under the same id."""
    if isinstance(frame, InboundFrame):
        return ("text", frame.text)
    return ("command", frame.command, frame.args)
