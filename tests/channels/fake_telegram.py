"""A local fake of the Telegram Bot API over real HTTP, speaking its request and response shapes.

python-telegram-bot is pointed at it with `base_url`; it answers `getMe`, `deleteWebhook`,
`setMyCommands`, `getUpdates` (long polling with offset confirmation: updates below the offset are
dropped, an empty queue waits up to `timeout` seconds for new ones), `sendMessage` (rejecting text
over 4096 UTF-16 units or empty, as Telegram does) and `sendChatAction`. Requests may be form
encoded (as the library sends them, JSON-encoded non-string values) or JSON.

    async with FakeTelegram(token) as fake:
        fake.push_text(chat_id=42, text="hello")      # a person writes to the bot
        await fake.wait_for_sent(1)                   # what the bot sent back: fake.sent
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from klaw.channels.telegram_split import utf16_length
from klaw.channels.web.server import EmbeddedServer

BOT_USER = {
    "id": 7000001,
    "is_bot": True,
    "first_name": "klaw test",
    "username": "klaw_test_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": False,
    "supports_inline_queries": False,
}
INT_PARAMS = {"chat_id", "offset", "limit", "timeout", "message_thread_id"}


@dataclass
class SentMessage:
    chat_id: int
    text: str
    bold: list[str] = field(default_factory=list)  # the text its "bold" entities cover (UTF-16 offsets)
    code: list[str] = field(default_factory=list)  # the text its "pre" and "code" entities cover


@dataclass
class FakeTelegram:
    token: str
    updates: list[dict[str, Any]] = field(default_factory=list)
    sent: list[SentMessage] = field(default_factory=list)
    actions: list[tuple[int, str]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # descriptions of 400s we answered
    # chats whose sendMessage Telegram answers 429 "retry after N seconds" (a flood of refusals)
    retry_after: dict[int, int] = field(default_factory=dict)
    _next_update: int = 100
    _next_message: int = 1
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    port: int = 0  # 0: any free one; a test that starts it late (Telegram out of reach at first) names one
    _server: EmbeddedServer | None = None
    _closing: bool = False

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.port}"

    async def __aenter__(self) -> FakeTelegram:
        app = Starlette(routes=[Route("/bot{token}/{method}", self._call, methods=["GET", "POST"])])
        self._server = EmbeddedServer(app, "127.0.0.1", self.port, grace_seconds=1.0)
        await self._server.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing = True  # release long polls, or the server would wait for them
        await self._notify()
        assert self._server is not None
        await self._server.stop()

    # -- scripting ------------------------------------------------------------------------------

    def push_text(self, chat_id: int, text: str, *, first_name: str = "Ana", from_id: int | None = None) -> int:
        """A text message from a person: a private chat's, or a group's (a negative `chat_id`) said by
        `from_id`; returns its message_id."""
        message_id = self._next_message
        self._next_message += 1
        chat = (
            {"id": chat_id, "first_name": first_name, "type": "private"}
            if chat_id > 0
            else {"id": chat_id, "title": "Family", "type": "group"}
        )
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": {"id": from_id or chat_id, "is_bot": False, "first_name": first_name, "language_code": "en"},
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if text.startswith("/"):
            message["entities"] = [{"offset": 0, "length": len(text.split()[0]), "type": "bot_command"}]
        self.updates.append({"update_id": self._next_update, "message": message})
        self._next_update += 1
        asyncio.get_running_loop().create_task(self._notify())
        return message_id

    def push_raw(self, message: Any) -> int:
        """An update whose `message` is whatever the test gives (a hostile or broken one); returns its update_id."""
        update_id = self._next_update
        self._next_update += 1
        self.updates.append({"update_id": update_id, "message": message})
        asyncio.get_running_loop().create_task(self._notify())
        return update_id

    async def wait_for(self, predicate: Any, *, seconds: float = 60) -> None:
        """Until `predicate()` holds; `seconds` is a safety net only."""
        async with asyncio.timeout(seconds), self._changed:
            await self._changed.wait_for(predicate)

    async def wait_for_sent(self, count: int) -> None:
        await self.wait_for(lambda: len(self.sent) >= count)

    def sent_to(self, chat_id: int) -> list[str]:
        return [message.text for message in self.sent if message.chat_id == chat_id]

    # -- the API --------------------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _params(self, request: Request) -> dict[str, Any]:
        if request.headers.get("content-type", "").startswith("application/json"):
            body = await request.body()
            return dict(json.loads(body)) if body else {}
        form = await request.form()
        params: dict[str, Any] = {}
        for key, value in form.items():
            assert isinstance(value, str)
            if key in INT_PARAMS:
                params[key] = int(value)
            elif value[:1] in "[{":
                params[key] = json.loads(value)
            else:
                params[key] = value
        return params

    async def _call(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return JSONResponse({"ok": False, "error_code": 401, "description": "Unauthorized"}, status_code=401)
        method = request.path_params["method"]
        params = await self._params(request)
        self.calls.append(method)
        handler = {
            "getMe": self._get_me,
            "deleteWebhook": self._true,
            "setMyCommands": self._true,
            "getUpdates": self._get_updates,
            "sendMessage": self._send_message,
            "sendChatAction": self._send_chat_action,
        }.get(method)
        if handler is None:
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, status_code=404)
        result = await handler(params)
        await self._notify()
        return result

    async def _get_me(self, _: dict[str, Any]) -> JSONResponse:
        return JSONResponse({"ok": True, "result": BOT_USER})

    async def _true(self, _: dict[str, Any]) -> JSONResponse:
        return JSONResponse({"ok": True, "result": True})

    async def _get_updates(self, params: dict[str, Any]) -> Response:
        offset = params.get("offset")
        if offset is not None:
            self.updates = [u for u in self.updates if u["update_id"] >= offset]  # confirmed ones are gone
        timeout = float(params.get("timeout", 0))
        if not self.updates and timeout > 0:
            async with self._changed:
                try:
                    async with asyncio.timeout(timeout):
                        await self._changed.wait_for(lambda: bool(self.updates) or self._closing)
                except TimeoutError:
                    pass
        limit = int(params.get("limit", 100))
        # ASCII JSON, as a text holding a lone surrogate reaches a bot: `\ud800` (no UTF-8 can carry it)
        body = json.dumps({"ok": True, "result": self.updates[:limit]}, ensure_ascii=True)
        return Response(body, media_type="application/json")

    async def _send_message(self, params: dict[str, Any]) -> JSONResponse:
        text = str(params.get("text", ""))
        if not text.strip():
            return self._bad_request("Bad Request: message text is empty")
        if utf16_length(text) > 4096:
            return self._bad_request("Bad Request: message is too long")
        chat_id = int(params["chat_id"])
        if (seconds := self.retry_after.get(chat_id)) is not None:
            said = f"Too Many Requests: retry after {seconds}"
            answer = {"ok": False, "error_code": 429, "description": said, "parameters": {"retry_after": seconds}}
            return JSONResponse(answer, status_code=429)
        entities = params.get("entities") or []
        entities = json.loads(entities) if isinstance(entities, str) else entities
        units = text.encode("utf-16-le")
        bold = [
            units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
            for e in entities
            if e.get("type") == "bold"
        ]
        code = [
            units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
            for e in entities
            if e.get("type") in ("pre", "code")
        ]
        self.sent.append(SentMessage(chat_id, text, bold, code))
        message_id = self._next_message
        self._next_message += 1
        result = {
            "message_id": message_id,
            "from": BOT_USER,
            "chat": {"id": chat_id, "first_name": "Ana", "type": "private"},
            "date": int(time.time()),
            "text": text,
        }
        return JSONResponse({"ok": True, "result": result})

    async def _send_chat_action(self, params: dict[str, Any]) -> JSONResponse:
        self.actions.append((int(params["chat_id"]), str(params.get("action"))))
        return JSONResponse({"ok": True, "result": True})

    def _bad_request(self, description: str) -> JSONResponse:
        self.rejected.append(description)
        return JSONResponse({"ok": False, "error_code": 400, "description": description}, status_code=400)
