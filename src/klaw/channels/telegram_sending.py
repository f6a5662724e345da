"""What the Telegram channel sends on its own: messages with retries, "typing…" while a turn runs, refusals.

Apart from `telegram.py`'s polling and routing so that each has room (decision 521). A message is tried
`SEND_ATTEMPTS` times, waiting as long as Telegram's "retry after" says; "typing…" (`sendChatAction`) is
renewed every `TYPING_EVERY_SECONDS` for up to `TYPING_AT_MOST_SECONDS`; a refusal to a stranger is sent
beside the poll loop, so Telegram's "retry after" on it never holds the owner's messages back, and past
`MAX_REFUSALS_UNDER_WAY` at once one is skipped (logged by chat id only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from telegram import Bot, MessageEntity
from telegram.error import RetryAfter, TelegramError

from klaw.channels.telegram_trouble import retry_wait, why
from klaw.engine.clock import Clock

log = logging.getLogger("klaw.channels.telegram")  # the channel's own logger, as before the split

TYPING_EVERY_SECONDS = 4.0
TYPING_AT_MOST_SECONDS = 120.0
SEND_ATTEMPTS = 3
MAX_REFUSALS_UNDER_WAY = 100
"""Refusals being sent beside the poll loop at once; past it a stranger's refusal is skipped (logged)."""


class TelegramSender:
    def __init__(self, bot: Bot, clock: Clock) -> None:
        self._bot = bot
        self._clock = clock
        self._typing: dict[int, asyncio.Task[None]] = {}
        self._refusing: set[asyncio.Task[None]] = set()  # refusals sent beside the poll loop

    def tasks(self) -> list[asyncio.Task[None]]:
        """What runs beside the poll loop (typing, refusals), for the channel's stop to cancel."""
        return [*self._typing.values(), *self._refusing]

    def forget_typing(self) -> None:
        self._typing.clear()

    def refuse_beside(self, chat_id: int, text: str) -> None:
        """Send a refusal without holding the poll loop (module docstring); skipped past a bound."""
        if len(self._refusing) >= MAX_REFUSALS_UNDER_WAY:
            log.info("telegram: a refusal to chat %d skipped: %d are being sent", chat_id, len(self._refusing))
            return
        task = asyncio.create_task(self._send_refusal(chat_id, text), name=f"telegram-refusal-{chat_id}")
        self._refusing.add(task)
        task.add_done_callback(self._refusing.discard)

    async def _send_refusal(self, chat_id: int, text: str) -> None:
        try:
            await self.send(chat_id, text)
        except (TelegramError, OSError) as exc:
            log.warning("telegram: could not send a refusal to chat %d (%s)", chat_id, why(exc))

    def start_typing(self, chat_id: int) -> None:
        self.stop_typing(chat_id)
        self._typing[chat_id] = asyncio.create_task(self._keep_typing(chat_id), name=f"telegram-typing-{chat_id}")

    def stop_typing(self, chat_id: int) -> None:
        task = self._typing.pop(chat_id, None)
        if task is not None:
            task.cancel()

    async def _keep_typing(self, chat_id: int) -> None:
        waited = 0.0
        while waited < TYPING_AT_MOST_SECONDS:
            with contextlib.suppress(TelegramError, OSError):
                await self._bot.send_chat_action(chat_id, "typing")
            await self._clock.sleep(TYPING_EVERY_SECONDS)
            waited += TYPING_EVERY_SECONDS
        self._typing.pop(chat_id, None)

    async def send(self, chat_id: int, text: str, entities: list[MessageEntity] | None = None) -> None:
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                await self._bot.send_message(chat_id, text, entities=entities or None)
                return
            except RetryAfter as exc:
                await self._clock.sleep(retry_wait(exc))
            except (TelegramError, OSError) as exc:
                if attempt == SEND_ATTEMPTS:
                    raise
                log.warning("telegram: sendMessage failed (%s); retrying", why(exc))
                await self._clock.sleep(attempt)
