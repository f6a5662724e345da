"""`TelegramChannel`: a Telegram bot over long polling (python-telegram-bot's `Bot`).

Only chats on `allowedChatIds` are served. Any other chat gets one refusal (per gateway run) and
nothing else: its message is neither buffered nor forwarded, and only its chat id is logged. In a group
every member speaks to the agent as its owner would (reads what it recalls, `/approve`s its held tools),
so `allowedUserIds`, when set, limits who is heard: anyone else gets one refusal per gateway run and is
not stored either (decision 281). A group on the list without it is warned about at start.

The polling loop is ours rather than the library's `Updater`, for one reason: an update is
confirmed to Telegram (the next `getUpdates` offset) only after its message is in the gateway's
durable buffer, so a crash can never lose a message Telegram already considers delivered. Message
ids are `tg-<chat>-<message id>`, so an update fetched twice is buffered and stored once. A message
klaw never takes (a lone surrogate) is answered in words and confirmed, not fetched again forever
with every later message behind it (adversary12); refusals to strangers are sent beside the loop,
so Telegram's "retry after" on them never holds the owner's messages back.

Slash commands (`/new`, `/model x`, also `/new@thisbot`) are forwarded as commands, `/new@otherbot` (for
another bot in a group) is ignored; `/start`
(what Telegram sends first) is `/help`. While a turn is under way the chat shows "typing…"
(`sendChatAction`, renewed every 4 s for up to 2 minutes). Replies are plain text, split at Telegram's
4096-character limit, 8 messages at most and then one saying how much was cut (telegram_split). An answer
the agent sends on its own (a scheduled task's, a subagent's, one written in another chat) opens with its
label line ("Scheduled task: digest", "From web:main"), as the console and the web page show it, so it is
not read as an answer to the last message. The bot token and message text are never logged, and the HTTP
libraries' loggers are held at WARNING, since their request lines carry the token in the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from telegram import Bot, BotCommand, MessageEntity, Update
from telegram.error import InvalidToken, NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.request import HTTPXRequest

from klaw.ascii_digits import digits
from klaw.channels.approval_mark import APPROVAL_HEADING
from klaw.channels.telegram_code import code_as_entities
from klaw.channels.telegram_outage import TelegramOutage
from klaw.channels.telegram_sending import TYPING_EVERY_SECONDS as TYPING_EVERY_SECONDS  # tests read it here
from klaw.channels.telegram_sending import TelegramSender
from klaw.channels.telegram_split import TELEGRAM_MESSAGE_LIMIT, reply_parts, utf16_length
from klaw.channels.telegram_trouble import (
    CONNECT_SECONDS,
    NOT_JSON,
    PAYLOAD_LOGGER,
    retry_wait,
    take_timedelta_periods,
    token_refused,
    unreachable,
    why,
    why_not,
)
from klaw.channels.telegram_updates import NOT_HANDLED, SKIPPED, Fetched, one_by_one, tame_parse_log, unfit
from klaw.command_syntax import COMMAND_NAMES, for_this_bot, parse_command
from klaw.config import CommandConfig, TelegramChannelConfig
from klaw.config.channels import NO_ALLOWED_CHAT
from klaw.engine.clock import Clock, SystemClock
from klaw.engine.frames import DeltaFrame, FrameError, OutboundFrame, unasked_label
from klaw.errors import KlawError
from klaw.gateway.buffer import BufferUnavailable
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.message_text import message_problem

log = logging.getLogger(__name__)

TELEGRAM_CHANNEL = "telegram"
POLL_TIMEOUT_SECONDS = 30
MAX_REFUSED_CHATS = 10_000
REFUSAL = (
    "Sorry, this is a private assistant and this chat (id {chat_id}) is not on its allow-list."
    " Nothing you send here is kept."
)
PERSON_REFUSAL = (
    "Sorry, this is a private assistant and you (user id {user_id}) are not on its allow-list."
    " Nothing you send here is kept."
)
NOT_TEXT = "I can only read text messages for now."
NOT_TAKEN = "This message was not taken: it {problem}."
QUIET_LOGGERS = ("httpx", "httpcore", "telegram")
UPDATES = ["message"]


class TelegramChannel:
    name: str = TELEGRAM_CHANNEL  # the Channel's name in frames
    streaming: bool = False  # replies are sent whole

    def __init__(
        self,
        config: TelegramChannelConfig,
        token: str,
        *,
        commands: Iterable[CommandConfig] = (),
        clock: Clock | None = None,
        poll_timeout: int = POLL_TIMEOUT_SECONDS,
    ) -> None:
        self._allowed = frozenset(config.allowed_chat_ids)
        self._people = frozenset(config.allowed_user_ids)
        self._commands = list(commands)
        self._clock = clock or SystemClock()
        self._outage = TelegramOutage(self._clock)
        self._poll_timeout = poll_timeout
        base = config.api_base_url.rstrip("/")
        self._base = base
        self._token_env = config.token_env
        take_timedelta_periods()
        # before `Bot()`, whose first debug line has the token; their request lines and dumps carry it and text
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(max(logging.getLogger(name).getEffectiveLevel(), logging.WARNING))
        logging.getLogger(PAYLOAD_LOGGER).setLevel(logging.CRITICAL)  # it quotes an answer that is no JSON
        tame_parse_log()  # the library's line for an update it cannot read quotes the update's text
        self._bot = Bot(
            token,
            base_url=f"{base}/bot",
            base_file_url=f"{base}/file/bot",
            get_updates_request=HTTPXRequest(read_timeout=10.0, connect_timeout=10.0),
        )
        self._gateway: Gateway | None = None
        self._poller: asyncio.Task[None] | None = None
        self._offset: int | None = None
        self._refused: set[int] = set()
        self._refused_people: set[int] = set()
        self._sender = TelegramSender(self._bot, self._clock)
        self._username = ""

    async def start(self, gateway: Gateway) -> None:
        self._gateway = gateway
        if not self._allowed:
            log.warning("telegram: %s", NO_ALLOWED_CHAT)
        groups = sorted(chat_id for chat_id in self._allowed if chat_id < 0)  # Telegram's groups are negative
        if groups and not self._people:
            log.warning(
                "telegram: group chat(s) %s are allowed and channels.telegram.allowedUserIds is empty: every member"
                " can talk to the agent, read what it recalls and /approve its tools; list the people to hear there",
                ", ".join(map(str, groups)),
            )
        try:
            await self._connect()
        except InvalidToken:  # its own message quotes the token: never shown
            raise TelegramTokenRefused(token_refused(self._token_env)) from None
        except (NetworkError, OSError) as exc:
            if not unreachable(exc):
                raise
            # The gateway's other channels (the web page) run meanwhile: Telegram is retried in the background.
            self._outage.failed(
                why_not(self._base, exc), 1.0, retrying="retrying in the background, the other channels run meanwhile"
            )
            self._poller = asyncio.create_task(self._connect_then_poll(), name="telegram-poll")
            return
        self._poller = asyncio.create_task(self._poll(), name="telegram-poll")
        log.info("telegram: polling as @%s for %d allowed chat(s)", self._username, len(self._allowed))

    @property
    def state(self) -> str:
        """What the channel is doing, for `klaw serve`'s start-up lines: polling once Telegram answered,
        else retrying in the background (it said "polling" right after "could not reach Telegram")."""
        if self._username:
            return f"polling as @{self._username}"
        return "not reached yet, retrying in the background (the log says why); the other channels run meanwhile"

    async def _connect(self) -> None:
        """getMe and the command menu, all within CONNECT_SECONDS: PTB's timeouts are per read, so a server
        trickling a byte at a time held `klaw serve`'s start (its web page too) for ever (decision 413)."""
        try:
            async with asyncio.timeout(CONNECT_SECONDS):
                await self._bot.initialize()  # getMe: fails here on a wrong token, or with no route to Telegram
                self._username = (self._bot.username or "").lower()
                with contextlib.suppress(TelegramError):  # the command menu is a nicety
                    await self._bot.delete_webhook()
                    await self._bot.set_my_commands([BotCommand(c.name, c.description[:256]) for c in self._commands])
        except TimeoutError:
            self._username = ""
            raise TimedOut(f"no whole answer within {CONNECT_SECONDS:.0f} s") from None
        except TelegramError as exc:
            if exc.message != NOT_JSON:
                raise
            raise NetworkError(NOT_JSON) from None  # a captive portal's or a proxy's page: out of reach, retried

    async def _connect_then_poll(self) -> None:
        """Telegram was out of reach at start (no DNS, no network): try again with a backoff, then poll.
        A token Telegram refuses ends the channel with the reason in the log (the gateway keeps running)."""
        backoff = Backoff(initial=1.0, maximum=60.0)
        delay = backoff.next()
        while True:
            await self._clock.sleep(delay)
            try:
                await self._connect()
            except InvalidToken:
                log.error("telegram: %s; the channel stays off until klaw restarts", token_refused(self._token_env))
                return
            except (NetworkError, OSError) as exc:
                if not unreachable(exc):
                    log.error("telegram: could not start (%s); the channel stays off until klaw restarts", why(exc))
                    return
                delay = backoff.next()
                self._outage.failed(why_not(self._base, exc), delay)
                continue
            break
        self._outage.reached(f"polling as @{self._username} for {len(self._allowed)} allowed chat(s)")
        await self._poll()

    async def stop(self) -> None:
        tasks = [*self._sender.tasks(), *([self._poller] if self._poller else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sender.forget_typing()
        self._poller = None
        if self._offset is not None:  # confirm what was buffered, so it is not fetched again
            with contextlib.suppress(TelegramError, OSError):
                await self._bot.get_updates(offset=self._offset, timeout=0)
        await self._bot.shutdown()

    async def deliver(self, frame: OutboundFrame) -> None:
        chat_id = int(frame.chat_id) if digits(frame.chat_id.removeprefix("-"), 20) else None
        if chat_id is None or chat_id not in self._allowed:
            log.warning("telegram: dropping a %s for chat %s, which is not allowed", frame.kind, frame.chat_id)
            return
        if frame.kind != "notice" or frame.reply_to is not None or frame.approval is not None:
            self._sender.stop_typing(chat_id)  # a notice on its own (a message over the budget) leaves the turn typing
        sent_from = frame.sent_from
        if sent_from is not None and chat_id < 0:  # a group's members are not told which chat (an id) wrote it
            sent_from = sent_from.partition(":")[0]
        label = unasked_label(frame.task, frame.spawned, sent_from)
        text = frame.text if label is None else f"{label}\n\n{frame.text}"
        # the heading is bold, an entity the model's plain text cannot make: a reply that itself starts
        # "From web:main" arrives plain, so it cannot pass for one klaw headed (decision 408)
        heading = [] if label is None else [MessageEntity(MessageEntity.BOLD, 0, utf16_length(label))]
        if frame.approval is not None and label is None:  # its arguments as Telegram shows code (decision 525)
            text = f"{APPROVAL_HEADING}\n\n{text}"  # headed in bold, which a reply cannot imitate (532)
            heading = [MessageEntity(MessageEntity.BOLD, 0, utf16_length(APPROVAL_HEADING))]
            shown, code = code_as_entities(text)
            if code and utf16_length(shown) <= TELEGRAM_MESSAGE_LIMIT:  # it always is: at most 3,000 shown
                await self._sender.send(chat_id, shown, heading + code)
                return
        for n, part in enumerate(reply_parts(text) or ["(empty reply)"]):
            await self._sender.send(chat_id, part, heading if n == 0 else [])

    async def delta(self, frame: DeltaFrame) -> None:
        """Not asked for (`streaming` is False): Telegram gets whole replies."""

    async def _poll(self) -> None:
        """The poll loop, started again whenever something escapes it: said in the log, never ended unseen
        while `klaw serve` runs on (adversary28, decision 487)."""
        backoff = Backoff(initial=1.0, maximum=60.0)
        while True:
            try:
                await self._poll_loop()
            except Exception as exc:
                delay = backoff.next()
                log.error("telegram: polling stopped (%s); polling again in %.0f s", why(exc), delay)
                await self._clock.sleep(delay)

    async def _fetch(self) -> list[Fetched]:
        """The next updates; a batch the library cannot read is read an update at a time (decision 487)."""
        try:
            updates = await self._bot.get_updates(
                offset=self._offset, timeout=self._poll_timeout, allowed_updates=UPDATES
            )
        except (TelegramError, OSError):
            raise
        except Exception:  # e.g. a date past year 9999: ValueError from the library's reading of one update
            return await one_by_one(self._bot, self._offset, UPDATES)
        return [Fetched(update.update_id, update) for update in updates]

    async def _poll_loop(self) -> None:
        backoff = Backoff(initial=1.0, maximum=60.0)
        while True:
            try:
                updates = await self._fetch()
            except RetryAfter as exc:
                await self._clock.sleep(retry_wait(exc))
                continue
            except (TelegramError, OSError) as exc:
                delay = backoff.next()
                self._outage.failed(f"getUpdates failed ({why(exc)})", delay)
                await self._clock.sleep(delay)
                continue
            backoff.reset()
            self._outage.reached("polling again")
            for fetched in updates:
                update = fetched.update
                problem = f"the library could not read it ({fetched.why})" if update is None else unfit(update)
                if update is None or problem is not None:
                    log.warning(SKIPPED, fetched.update_id, problem)
                    self._offset = fetched.update_id + 1  # skipped and confirmed: the chats go on
                    continue
                try:
                    await self._handle(update)
                except TelegramError as exc:  # taken in, but an answer (refusal, notice) failed
                    log.warning("telegram: could not answer update %d (%s)", update.update_id, why(exc))
                except (BufferUnavailable, OSError) as exc:  # klaw cannot store now: unconfirmed, fetched again
                    delay = backoff.next()
                    reason = why(exc)
                    log.error(
                        "telegram: could not take update %d (%s); retry in %.0f s", update.update_id, reason, delay
                    )
                    await self._clock.sleep(delay)
                    break
                except Exception as exc:  # this update, not the disk: retried it would hold every chat for ever
                    log.error(NOT_HANDLED, update.update_id, type(exc).__name__)
                self._offset = update.update_id + 1  # confirmed by the next getUpdates, after buffering

    async def _handle(self, update: Update) -> None:
        message = update.message
        if message is None:
            return
        chat_id = message.chat.id
        if chat_id not in self._allowed:
            if chat_id not in self._refused and len(self._refused) < MAX_REFUSED_CHATS:
                self._refused.add(chat_id)
                log.info("telegram: refused chat %d (not on the allow-list)", chat_id)
                self._sender.refuse_beside(chat_id, REFUSAL.format(chat_id=chat_id))
            return
        user_id = message.from_user.id if message.from_user else None
        if self._people and user_id not in self._people:
            await self._refuse_person(chat_id, user_id)
            return
        if message.text is None:
            await self._sender.send(chat_id, NOT_TEXT)
            return
        text = for_this_bot(message.text, self._username)
        if text is None:
            return  # `/cmd@other_bot` in a group: for another bot, not a message to us
        if (problem := message_problem(text)) is not None:  # never taken: said once, the update confirmed
            await self._sender.send(chat_id, NOT_TAKEN.format(problem=problem))
            return
        sender = str(user_id) if user_id is not None else None
        try:
            submitted = await self._require_gateway().submit(
                TELEGRAM_CHANNEL, str(chat_id), text, message_id=f"tg-{chat_id}-{message.message_id}", sender=sender
            )
        except FrameError as exc:  # refused as the engine would refuse it: final, not a full disk
            log.info("telegram: a message in chat %d was not taken (%s)", chat_id, exc.message)
            await self._sender.send(chat_id, f"This message was not taken: {exc.message}.")
            return
        command = parse_command(text)  # a command is answered at once; `/skill words` runs a turn (decision 536)
        if not (submitted.duplicate or submitted.queued) and (command is None or command.name not in COMMAND_NAMES):
            self._sender.start_typing(chat_id)  # not while the engine is down: nobody is typing then

    async def _refuse_person(self, chat_id: int, user_id: int | None) -> None:
        """Once per person a gateway run (a channel's post, with no person, is never answered)."""
        if user_id is None or user_id in self._refused_people or len(self._refused_people) >= MAX_REFUSED_CHATS:
            return
        self._refused_people.add(user_id)
        log.info("telegram: refused user %d in chat %d (not on allowedUserIds)", user_id, chat_id)
        self._sender.refuse_beside(chat_id, PERSON_REFUSAL.format(user_id=user_id))

    def _require_gateway(self) -> Gateway:
        if self._gateway is None:
            raise RuntimeError("the telegram channel is not started")
        return self._gateway


class TelegramTokenRefused(KlawError, RuntimeError):
    """Telegram refused the bot token at start: fatal, with what to fix (never the token itself)."""
