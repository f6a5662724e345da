"""What went wrong talking to Telegram, in words for the log, and how long Telegram asked us to wait.

`why` says a failure as a person acts on it ("Telegram did not answer in time"), not as an exception's
class; `unreachable` tells a network that is down (worth retrying) from a refusal; `retry_wait` reads
a `RetryAfter`'s asked wait in seconds. python-telegram-bot 22.2 warns (PTBDeprecationWarning) each
time a `RetryAfter` is made and its `retry_after` read: an int today, a `timedelta` in its next major
version. `take_timedelta_periods` opts in to the coming type now, as PTB documents (`PTB_TIMEDELTA=true`,
unless the person set it), so neither warns; `retry_wait` takes either type, and holds the warning off
for its one read should the person have set it false (docs/decisions/388-ptb-time-periods-opted-in.md).
"""

from __future__ import annotations

import os
import warnings
from datetime import timedelta

from telegram.error import InvalidToken, NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.warnings import PTBDeprecationWarning

from klaw.errors import KlawError

NO_NAME = ("Name or service not known", "Temporary failure in name resolution", "nodename nor servname")
"""How a failed DNS lookup reads in the connection error (glibc, macOS)."""


def take_timedelta_periods() -> None:
    """PTB's time periods as `timedelta` now, as its next major version gives them: no warning each time
    Telegram says "retry after". Process-wide (PTB reads the variable at each use); a value set is kept."""
    os.environ.setdefault("PTB_TIMEDELTA", "true")


def retry_wait(exc: RetryAfter) -> float:
    """The seconds Telegram asked to wait before the next call, whichever type PTB gives them in."""
    with warnings.catch_warnings():  # no await inside: nothing else runs while the filter is changed
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        wait = exc.retry_after
    return wait.total_seconds() if isinstance(wait, timedelta) else float(wait)


CONNECT_SECONDS = 10.0
"""The channel's connect (getMe, the command menu) at most, whatever trickles in meanwhile (decision 413)."""

NOT_JSON = "Invalid server response"
"""python-telegram-bot's words for an answer that is no JSON: something other than the Bot API answered."""

PAYLOAD_LOGGER = "telegram.request.BaseRequest"
"""Logs, with a traceback, the whole answer that was no JSON (it may quote messages): never shown."""


def unreachable(exc: BaseException) -> bool:
    """Telegram out of reach (no DNS, no route, a timeout), not a refusal: worth retrying."""
    return isinstance(exc, (TimedOut, OSError)) or type(exc) is NetworkError


def why(exc: BaseException) -> str:
    """Why a call to Telegram failed, in words for the log ("Telegram did not answer in time"), not the
    exception's class ("TimedOut"). A network error's own text names httpx's classes, so it is not quoted;
    Telegram's refusals ("Forbidden: bot was blocked by the user") are its own words and are."""
    if isinstance(exc, TimedOut):
        return "Telegram did not answer in time"
    if isinstance(exc, InvalidToken):
        return "Telegram refused the bot token: check the variable channels.telegram.tokenEnv names"
    if type(exc) is NetworkError:
        return "could not reach Telegram: check this machine's network"
    if isinstance(exc, TelegramError):
        return f"Telegram said: {exc.message}"
    if isinstance(exc, OSError):
        return (exc.strerror or "the connection failed").lower()
    if isinstance(exc, KlawError):  # the buffer's "the disk is full …": klaw's own sentence
        return str(exc)
    return f"an unexpected {type(exc).__name__}, a bug worth reporting"  # the class helps the report


def why_not(base: str, exc: BaseException) -> str:
    """Telegram out of reach, in words naming the address (channels.telegram.apiBaseUrl) and what to check."""
    text = str(exc)
    if any(words in text for words in NO_NAME):
        reason = "its name did not resolve (DNS)"
    elif NOT_JSON in text:
        reason = "what answered is not Telegram's Bot API (no JSON: a captive portal or a proxy?)"
    elif isinstance(exc, TimedOut):
        reason = "it did not answer in time"
    else:
        reason = "the connection failed"
    return (
        f"could not reach Telegram at {base} (channels.telegram.apiBaseUrl): {reason}. Check this"
        " machine's DNS and network (or a proxy or firewall in between), or the address"
    )


def token_refused(token_env: str) -> str:
    """Telegram refused the token: which variable holds it and what to put there (never the token)."""
    return (
        f"Telegram refused the bot token in {token_env} (channels.telegram.tokenEnv names the variable): put"
        " the token @BotFather gave you there, whole"
    )
