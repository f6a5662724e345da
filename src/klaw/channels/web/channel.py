"""`WebChannel`: the web page as one of the gateway's channels.

The person on the page is one chat, `web:<chat_id>` (default `web:main`). What they type goes
through the gateway (buffered, then to the engine); replies come back as frames and are published
to every open tab's event stream, pieces first (`delta`) and then the whole reply, with its Markdown
rendered as sanitized HTML (markdown.py) and, for a scheduled task's answer, the task's name. The server runs
in the gateway's event loop; the login token is created on first start and printed by the command
that starts the gateway, never logged.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

from klaw.atomic_file import replace_file
from klaw.channels.web.app import create_app
from klaw.channels.web.auth import WebAuth
from klaw.channels.web.events import EventHub
from klaw.channels.web.markdown import render as render_markdown
from klaw.channels.web.markdown import render_literal
from klaw.channels.web.sent_again import message_id_for
from klaw.channels.web.server import EmbeddedServer
from klaw.channels.web.token import load_or_create_token
from klaw.config import WebChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.config_view import ConfigRow, config_rows
from klaw.engine.frames import DeltaFrame, OutboundFrame, tools_used, unasked_label
from klaw.gateway.service import Gateway, Submitted
from klaw.home import KlawHome

log = logging.getLogger(__name__)

WEB_CHANNEL = "web"
PLAIN_HTTP_WARNING = (
    "the web page %s, beyond this machine, over plain HTTP: the token and every message cross the"
    " network unencrypted. Keep host: 127.0.0.1 and reach it through SSH or a TLS reverse proxy"
    " (docs/channels.md), or make sure the network is yours alone."
)


def exposed(config: WebChannelConfig) -> str | None:
    """How the page is reached beyond this machine over plain HTTP ("listens on 0.0.0.0"), for the
    warning; None when it is not. With `publishedUrl` that address decides (decision 403): a container
    listens on 0.0.0.0 for its published port, and compose.yaml publishes it on the host's 127.0.0.1."""
    if config.published_url is not None:
        parts = urlsplit(config.published_url)
        if parts.scheme == "https" or is_loopback(parts.hostname or ""):
            return None
        return f"is published at {config.published_url}"
    return None if is_loopback(config.host) else f"listens on {config.host}"


def is_loopback(host: str) -> bool:
    """Only this machine can connect (`localhost`, 127.0.0.0/8, ::1); anything else, `0.0.0.0` included, cannot be."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebChannel:
    name: str = WEB_CHANNEL  # the Channel's name in frames
    streaming: bool = True  # the page shows replies as they are written

    def __init__(self, home: KlawHome, config: WebChannelConfig, loaded: LoadedConfig, chat_id: str = "main") -> None:
        self._home = home
        self._config = config
        self._loaded = loaded
        self.chat_id = chat_id
        self.hub = EventHub()
        self._gateway: Gateway | None = None
        self._server: EmbeddedServer | None = None
        self.token = ""

    # -- Channel ----------------------------------------------------------------------------------

    async def start(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self.token = load_or_create_token(self._home)
        auth = WebAuth(self.token, revoked_file=self._home.web_revoked_file)
        self._server = EmbeddedServer(
            create_app(self, auth, (self._config.host, *self._config.allowed_hosts)),
            self._config.host,
            self._config.port,
        )
        try:
            await self._server.start()
        except OSError as exc:  # the port is taken (another klaw serve?) or the host is not this machine's
            raise OSError(
                f"the web page cannot listen on {self._config.host}:{self._config.port} ({exc.strerror or exc}):"
                " choose another port in channels.web.port (or KLAW__CHANNELS__WEB__PORT), or stop what holds it"
            ) from None
        log.info("web page listening on %s", self.url)
        replace_file(self._home.web_address_file, f"{self.url}\n".encode())
        if (where := exposed(self._config)) is not None:
            log.warning(PLAIN_HTTP_WARNING, where)

    async def stop(self) -> None:
        self.hub.close()
        if self._server is not None:
            self._home.web_address_file.unlink(missing_ok=True)
            await self._server.stop()
            self._server = None

    async def deliver(self, frame: OutboundFrame) -> None:
        data: dict[str, Any] = {"chat_id": frame.chat_id, "reply_to": frame.reply_to, "text": frame.text}
        if frame.kind == "reply":  # notices (command output) and errors stay plain text
            data["html"] = render_markdown(frame.text)
        elif frame.approval is not None:  # its arguments' code block as one, every character as written
            data["html"] = render_literal(frame.text)
        if frame.task is not None:
            data["task"] = frame.task
        if frame.task is not None or frame.sent_from is not None:  # sent unasked: the page heads it with whose
            data["task_label"] = unasked_label(frame.task, frame.spawned, frame.sent_from)
            data["sent_from"] = frame.sent_from
        if frame.id is not None:  # a turn's reply: the page shows it once, were it also in the history
            data["id"] = frame.id
        if frame.answers:  # every message this reply answers: a script waiting for any of them gets it
            data["answers"] = list(frame.answers)
        if frame.tools:  # the page lists the turn's tool calls under its reply, as klaw chat does
            data["tools"] = list(frame.tools)
            data["tools_line"] = tools_used(frame.tools)
        if frame.approval is not None:  # the page offers Approve / Deny buttons, which send /approve ID
            data["approval"] = frame.approval
        if frame.forgotten:  # the erased messages are neither replayed nor left on the page (it reloads)
            self.hub.forget_chat(frame.chat_id)
            data["forgotten"] = True
        self.hub.publish(frame.kind, data)

    async def delta(self, frame: DeltaFrame) -> None:
        self.hub.publish("delta", {"chat_id": frame.chat_id, "reply_to": frame.reply_to, "text": frame.text})

    # -- WebBackend -------------------------------------------------------------------------------

    @property
    def shown_url(self) -> str:
        """The address a person opens: `publishedUrl`, else the one it listens on."""
        return self._config.published_url or self.url

    @property
    def url(self) -> str:
        host = self._config.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self._server.port if self._server else self._config.port}/"

    async def submit(self, text: str, client_id: str | None = None) -> Submitted:
        """A page's message; one sent again with the same `client_id` (its response was lost) is the same
        message, stored once, as a Telegram update fetched twice is (decision 479)."""
        message_id = None if client_id is None else message_id_for(self.chat_id, client_id)
        gateway = self._require_gateway()
        verdict = message_id is not None  # the engine's word on it: another text under the id is a 409 (503)
        return await gateway.submit(WEB_CHANNEL, self.chat_id, text, message_id=message_id, verdict=verdict)

    async def query(self, name: str, params: dict[str, Any]) -> Any:
        return await self._require_gateway().query(name, params)

    def status(self) -> dict[str, Any]:
        gateway = self._require_gateway()
        return {"engine_connected": gateway.connected, "buffered": len(gateway.buffer)}

    def settings(self) -> list[ConfigRow]:
        return config_rows(self._loaded)

    def _require_gateway(self) -> Gateway:
        if self._gateway is None:
            raise RuntimeError("the web channel is not started")
        return self._gateway
