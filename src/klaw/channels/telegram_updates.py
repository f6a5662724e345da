"""Updates python-telegram-bot cannot read, passed over instead of stopping Telegram (decision 487).

`Bot.get_updates` parses the whole batch at once: one update it cannot read (a `date` of 10**12 is year
33658, past what `datetime` holds) raises out of it, and before, out of the poll loop, which died unseen
while `klaw serve` ran on. On such a failure the batch is fetched again raw (`do_api_request`, no long
poll) and each update read alone: the readable ones are handled as ever, an unreadable one is skipped by
its `update_id` (confirmed past, so it is not fetched again) and said in the log by id and the reason's
class only. The library's own CRITICAL line for it quotes the raw batch, message text and all: klaw never
logs a message's content, so `ContentFreeParseLog` drops that one line and lets the logger's others pass.

The library reads without checking types, so a message it does read may still be unfit: text that is a
number or a list, no chat, a chat id given as a string (`"42"`, which must not pass for chat 42).
`unfit` says, by field and type only, why such a message cannot be handled; it is skipped and confirmed
like an unreadable one, nothing sent (adversary30, decision 515).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any

from telegram import Bot, Update

PARSE_LOGGER = "telegram.Bot"
"""Logs "Error while parsing updates! Received data was [...]": the raw updates, their text included."""


class ContentFreeParseLog(logging.Filter):
    """Drops python-telegram-bot's parse-failure line, which quotes the raw updates; klaw says it instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Error while parsing updates")


def tame_parse_log() -> None:
    """The filter on the library's Bot logger, once however many channels start."""
    logger = logging.getLogger(PARSE_LOGGER)
    if not any(isinstance(f, ContentFreeParseLog) for f in logger.filters):
        logger.addFilter(ContentFreeParseLog())


SKIPPED = "telegram: skipped update %d: %s; its message is lost"
"""An update passed over (confirmed), by id and why only: the library could not read it, or `unfit` says."""
NOT_HANDLED = "telegram: skipped update %d: handling it raised %s, a bug worth reporting; its message is lost"
LARGEST_ID = 2**63
"""Telegram's ids fit in 52 bits; anything past a signed 64-bit integer is no id klaw can store."""


def unfit(update: Update) -> str | None:
    """Why the message of an update the library read cannot be handled, in words naming the field and the
    type only (never a value: it may be the text), or None when every field the channel reads is sound."""
    message = update.message
    if message is None:
        return None
    if (why := _not_an_id("message_id", message.message_id)) is not None:
        return why
    chat = message.chat
    if chat is None:
        return "its message has no chat"
    if (why := _not_an_id("chat id", chat.id)) is not None:
        return why
    if message.from_user is not None and (why := _not_an_id("sender's id", message.from_user.id)) is not None:
        return why
    if message.text is not None and not isinstance(message.text, str):
        return f"its text is {_kind(message.text)}, not a string"
    return None


def _not_an_id(field: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"its {field} is {_kind(value)}, not a whole number"
    if not -LARGEST_ID <= value < LARGEST_ID:
        return f"its {field} is a number too large for an id"
    return None


def _kind(value: object) -> str:
    """A value's type in words ("a str", "an int", "missing"), never the value."""
    if value is None:
        return "missing"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


@dataclass(frozen=True, slots=True)
class Fetched:
    """One raw update: read (`update`), or not (`update` None and `why` the exception's class)."""

    update_id: int
    update: Update | None
    why: str = ""


async def one_by_one(bot: Bot, offset: int | None, allowed: list[str]) -> list[Fetched]:
    """The batch `get_updates` could not read, fetched raw at once and read an update at a time. An item
    with no integer `update_id` cannot be confirmed by itself: it is left out, and passed with the ones
    after it (Telegram's ids rise); a batch of only such items gives nothing, for the caller's backoff."""
    kwargs: dict[str, Any] = {"timeout": 0, "allowed_updates": allowed}
    if offset is not None:
        kwargs["offset"] = offset
    with warnings.catch_warnings():  # "use Bot.get_updates": the point is to read the batch without it
        warnings.simplefilter("ignore")
        raw = await bot.do_api_request("getUpdates", api_kwargs=kwargs)
    fetched: list[Fetched] = []
    for item in raw if isinstance(raw, list) else []:
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            continue
        try:
            fetched.append(Fetched(update_id, Update.de_json(item, bot)))
        except Exception as exc:  # whatever the library's reading raises: the update is passed over
            fetched.append(Fetched(update_id, None, type(exc).__name__))
    if raw and not fetched:  # nothing to confirm by: the poll loop's supervisor says so and backs off
        raise ValueError("Telegram sent updates with no update_id to confirm them by")
    return fetched
