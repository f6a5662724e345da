"""The channels the gateway runs (`channels:`) and the slash commands offered (`commands:`)."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from klaw.config.base import Section, http_url, variable_name
from klaw.text_preview import preview

TELEGRAM_ID = re.compile(r"-?[0-9]{1,20}")  # a person's chat, or a group's (negative)


def telegram_id_refused(chat_id: str, *, prefixed: bool = True) -> str | None:
    """Why `chat_id` is no Telegram chat's id, in the one sentence every place a person writes one says (a
    chat typed to `Klaw.ask` or `klaw schedule add`, engine.yaml's allow-list and message targets, a stored
    task's target: decisions 501, 510); None when it is one. `prefixed`: written `telegram:<id>` there."""
    if TELEGRAM_ID.fullmatch(chat_id):
        return None
    example = "telegram:123456789" if prefixed else "123456789"
    bare = chat_id.strip().removeprefix("telegram:").strip()
    alone = f" (here the number alone: {bare})" if not prefixed and TELEGRAM_ID.fullmatch(bare) else ""
    return (
        f"a Telegram chat's id is its number (e.g. {example}, a group's is negative), not {preview(chat_id)!r}:"
        f" the bot's refusal names it when that chat writes to it (docs/channels.md){alone}"
    )


def _chat_id(value: object) -> object:
    """An `allowedChatIds` entry: a number (YAML's, or digits quoted); anything else refused in the sentence
    a typed chat gets. pydantic's own "unable to parse string as an integer" named no fix, and `true` was
    read as the chat 1."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value.strip() if isinstance(value, str) else repr(value)
    if isinstance(value, str) and TELEGRAM_ID.fullmatch(text):
        return int(text)
    said = telegram_id_refused(text, prefixed=False) or ""
    raise PydanticCustomError("telegram_chat_id", said)


def _bare_host_name(value: str) -> str:
    """An `allowedHosts` entry is compared with the name in a request's `Host`: a URL or a port there
    would never match, and the page would refuse its own proxy with no hint why."""
    name = value.strip().lower()
    try:
        parts = urlsplit("//" + name)
        bare = parts.port is None and parts.netloc == name and parts.hostname == name.strip("[]")
    except ValueError:  # a port that is not a number, an unclosed IPv6 bracket
        bare = False
    if not name or not bare or "@" in name or any(char.isspace() for char in name):
        raise ValueError(
            f"{value!r} is not a host name: write the name alone, without scheme, port or path, e.g. klaw.example.org"
        )
    return name


def _published_url(value: str | None) -> str | None:
    """The address a person opens: http(s) with a host, as a browser's address bar takes it."""
    if value is None:
        return None
    if not http_url(value, query=False):
        raise ValueError(
            "must be the address a person opens, an http:// or https:// URL with a host, e.g."
            " http://127.0.0.1:8765/ (a container's published port) or https://klaw.example.org/ (a reverse proxy)"
        )
    return value


class WebChannelConfig(Section):
    """The web page (chat, memory inspector, settings), served by the gateway."""

    enabled: bool = True
    host: str = Field(default="127.0.0.1", min_length=1, description="Listen address; keep 127.0.0.1 unless proxied.")
    port: int = Field(default=8765, ge=0, le=65535, description="TCP port (0: any free port).")
    allowed_hosts: tuple[Annotated[str, AfterValidator(_bare_host_name)], ...] = Field(
        default=(),
        description="Names the page answers to besides localhost, IP addresses and host (your reverse proxy's).",
    )
    published_url: Annotated[str | None, AfterValidator(_published_url)] = Field(
        default=None,
        description="The address a person opens when it is not host:port itself (a container's published port,"
        " a reverse proxy): klaw serve shows it, and warns about plain HTTP only when it is reached beyond this"
        " machine over http://.",
    )


NO_ALLOWED_CHAT = (
    "channels.telegram.allowedChatIds is empty; every chat will be refused. Send the bot a message while klaw"
    " serve runs: its refusal names the chat id to put in allowedChatIds"
)


class TelegramChannelConfig(Section):
    """A Telegram bot (long polling). The bot token is read from the environment variable `tokenEnv`."""

    enabled: bool = False
    token_env: Annotated[str, variable_name("token", "KLAW_TELEGRAM_TOKEN")] = Field(
        default="KLAW_TELEGRAM_TOKEN", description="Name of the environment variable holding the bot token."
    )
    allowed_chat_ids: tuple[Annotated[int, BeforeValidator(_chat_id)], ...] = Field(
        default=(), description="Chats the bot answers; any other chat gets one refusal and nothing is stored."
    )
    allowed_user_ids: tuple[int, ...] = Field(
        default=(),
        description="People heard in the allowed chats (empty: everyone in them); others' messages are not stored.",
    )
    api_base_url: str = Field(default="https://api.telegram.org", description="Bot API server (tests: a fake).")

    def refuses_everyone(self) -> str | None:
        """The warning for an enabled bot with no allowed chat, said alike by `klaw serve` and `klaw config
        check` (which called such a file plainly valid); None otherwise."""
        if not self.enabled or self.allowed_chat_ids:
            return None
        return NO_ALLOWED_CHAT

    def unserved(self, chat_id: str) -> str | None:
        """Why replies injected into `telegram:<chat_id>` (a scheduled task's) reach nobody: the bot is off,
        or the chat is not one it serves; None when it is. Said at `klaw schedule add` and at each run, where
        "Added" and "completed" said nothing while the replies sat in a chat nothing delivers (decision 501)."""
        if not self.enabled:
            return "channels.telegram.enabled is false: nothing delivers replies to a Telegram chat"
        if chat_id not in {str(allowed) for allowed in self.allowed_chat_ids}:
            return f"telegram:{chat_id} is not in channels.telegram.allowedChatIds: the bot delivers nothing to it"
        return None

    @model_validator(mode="after")
    def _api_is_http(self) -> TelegramChannelConfig:
        if not self.api_base_url.startswith(("http://", "https://")):
            raise ValueError("apiBaseUrl must start with http:// or https://")
        return self


class ChannelsConfig(Section):
    """The channels `klaw gateway` (and `klaw serve`) runs."""

    web: WebChannelConfig = WebChannelConfig()
    telegram: TelegramChannelConfig = TelegramChannelConfig()
    engine_reconnect_max_seconds: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="The longest wait between the gateway's attempts to reach a lost engine (the first after 0.2 s,"
        " doubling up to this): lower, a restarted engine is reached sooner, at the cost of more attempts.",
    )


class CommandConfig(Section):
    name: str
    description: str


def _default_commands() -> tuple[CommandConfig, ...]:
    return tuple(
        CommandConfig(name=name, description=description)
        for name, description in (
            ("new", "Start a new conversation segment"),
            ("model", "Show or switch this chat's model: /model [id]"),
            ("models", "List configured models and their context budgets"),
            ("memory", "Show core memory and saved memories"),
            (
                "forget",
                "Erase for good: /forget last | exchange ID | segment ID | segment number N | memory ID"
                " (a segment asks first: + confirm)",
            ),
            ("status", "Uptime, model, segment start, queue depth"),
            ("context", "What went into the last turn's context"),
            ("tools", "The tools this chat's model is offered, and those missing and why"),
            ("summarizer", "Background summaries of exchanges and segments: /summarizer [on|off|status]"),
            ("embeddings", "The embedding worker: /embeddings [on|off|status|rebuild]"),
            ("rag", "Past conversations in the context: /rag [on|off|config|set <key> <value>|reset [key]]"),
            ("approve", "Let the agent run a tool it asked for: /approve ID"),
            ("deny", "Refuse a tool the agent asked for: /deny ID"),
            ("help", "List commands"),
        )
    )
