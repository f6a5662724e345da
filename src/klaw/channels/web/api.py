"""The page's JSON and event-stream endpoints: chat and its history, inspector, memory browsing and search, settings.

Everything needs a valid session; POSTs also need the session's CSRF token in `X-CSRF-Token` and a
JSON body (a cross-site form cannot send one without a CORS preflight, which is never granted).
A script may instead send the token as a bearer key (`Authorization: Bearer …`, no CSRF token:
decision 247); `POST /api/messages?wait=N` then answers with the reply itself, waited for at most N
seconds, so one `curl` asks the agent and prints what it said.
Inspector data comes from the engine over its socket (`query` frames), so while the engine is down
those endpoints answer 503 and the chat keeps working, its messages buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from klaw.channels.web.approval_wait import answered_question, took_the_answer, unblocked_reply
from klaw.channels.web.auth import CSRF_HEADER, SESSION_COOKIE, WebAuth
from klaw.channels.web.events import EventHub, Subscription
from klaw.channels.web.markdown import render as render_markdown
from klaw.channels.web.markdown import render_literal
from klaw.channels.web.sent_again import message_id_for, refused_as_other_text, reused, sent_before
from klaw.config_view import ConfigRow, shown
from klaw.engine.frames import FrameError, tools_before_failing, tools_used
from klaw.gateway.buffer import BufferUnavailable
from klaw.gateway.link import EngineUnavailable, QueryFailed
from klaw.gateway.service import Submitted
from klaw.message_text import message_problem

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
MAX_WAIT_SECONDS = 600
CLIENT_ID_PATTERN = r"^[A-Za-z0-9_-]{8,64}$"
ANSWERS = frozenset({"reply", "notice", "error"})  # what ends a message's wait (pieces, `delta`, do not)


class WebBackend(Protocol):
    """What the page needs from the gateway side (the `WebChannel`)."""

    @property
    def chat_id(self) -> str: ...

    @property
    def hub(self) -> EventHub: ...

    async def submit(self, text: str, client_id: str | None = None) -> Submitted: ...

    async def query(self, name: str, params: dict[str, Any]) -> Any: ...

    def status(self) -> dict[str, Any]: ...

    def settings(self) -> list[ConfigRow]: ...


class MessageIn(BaseModel):
    """The body of `POST /api/messages`. Its text is judged by `message_problem` in the handler, not by
    field limits, so a blank or overlong message gets the sentence every channel gives ("the message is
    120,000 characters, more than the 100,000 …; put the text in a file …"), not pydantic's.

    `client_id`, the page's own id for this message (kept with it in the outbox), makes a POST sent again
    after its response was lost (a dropped connection, a proxy's 504) stored once (decision 479)."""

    # a field it does not take is refused (422 naming it): `"chat": "carol"` was silently dropped and the message
    # answered in web:main, as if the API could post into another chat (newcomer24, decision 540)
    model_config = ConfigDict(extra="forbid")

    text: str
    client_id: str | None = Field(default=None, pattern=CLIENT_ID_PATTERN)


def build_api(backend: WebBackend, auth: WebAuth) -> APIRouter:
    def session(request: Request) -> str | None:
        """The session cookie, or None for a script holding the token as its bearer key."""
        if auth.valid_bearer(request.headers.get("authorization")):
            return None
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie is None or not auth.valid_session(cookie):
            raise HTTPException(401, "sign in first, or send Authorization: Bearer <the token in KLAW_HOME/web_token>")
        return cookie

    def csrf(request: Request, cookie: str | None = Depends(session)) -> str | None:
        if cookie is not None and not auth.valid_csrf(cookie, request.headers.get(CSRF_HEADER)):
            raise HTTPException(403, "missing or wrong CSRF token; reload the page")
        return cookie

    router = APIRouter(prefix="/api")

    @router.get("/session")
    async def session_info(cookie: str | None = Depends(session)) -> dict[str, Any]:
        csrf_token = auth.csrf_for(cookie) if cookie is not None else None  # a bearer key needs none
        chat = {"channel": "web", "chat_id": backend.chat_id, "outbox": auth.outbox_key}
        return {"csrf": csrf_token, **chat, **backend.status()}

    @router.get("/status", dependencies=[Depends(session)])
    async def status() -> dict[str, Any]:
        return backend.status()

    @router.post("/messages", dependencies=[Depends(csrf)])
    async def post_message(
        message: MessageIn,
        wait: float = Query(
            0, ge=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False, description="Seconds to wait for the reply."
        ),
    ) -> dict[str, Any]:
        problem = message_problem(message.text)
        if problem is not None:  # final: nothing was stored, and the sentence says what to change
            raise HTTPException(422, f"the message {problem}")
        if message.client_id is not None:  # sent before? (its response lost): decision 487
            before = await sent_before(backend.query, backend.chat_id, message.client_id, message.text)
            if before is not None and not before.get("same_text"):
                raise HTTPException(409, reused(message.client_id))
            if before is not None and wait > 0 and (reply := before.get("reply")) is not None:
                shown_reply = {"kind": "reply", **reply, "html": render_markdown(reply["text"])}
                sent_id = message_id_for(backend.chat_id, message.client_id)
                return {"id": sent_id, "queued": False, "reply": shown_reply, "repeated": True}
        started = asyncio.get_running_loop().time()
        # An answer to a question of this chat: the wait covers the reply it unblocks (decision 525)
        held = await answered_question(message.text, lambda: waiting_approvals(backend)) if wait > 0 else None
        async with backend.hub.subscribe() as answers:  # before submitting: a quick reply is not missed
            try:
                submitted = await backend.submit(message.text, message.client_id)
            except FrameError as exc:  # final: never buffered, so nothing is lost by refusing
                if exc.code == "frame_too_large":
                    raise HTTPException(413, "the message is too long") from None
                raise HTTPException(422, exc.message) from None
            except BufferUnavailable as exc:  # the gateway's disk is full: say so, never a bare 500
                raise HTTPException(503, str(exc)) from None
            if submitted.other_text:  # the engine down or behind: the buffer holds the id with other words (500)
                raise HTTPException(409, reused(message.client_id or submitted.id))
            if message.client_id is not None and await refused_as_other_text(submitted):  # 503: the engine's word
                raise HTTPException(409, reused(message.client_id))
            if message.client_id is not None and wait > 0:  # a twin post took the id and was answered meanwhile
                before = await sent_before(backend.query, backend.chat_id, message.client_id, message.text)
                if before is not None and (reply := before.get("reply")) is not None:
                    shown_reply = {"kind": "reply", **reply, "html": render_markdown(reply["text"])}
                    return {"id": submitted.id, "queued": False, "reply": shown_reply}
            sent: dict[str, Any] = {"id": submitted.id, "queued": submitted.queued}
            if wait > 0:
                sent["reply"] = await _answer_to(answers, submitted.id, wait)
            if held is not None and took_the_answer(sent["reply"]):
                left = wait - (asyncio.get_running_loop().time() - started)
                sent["unblocked"] = await unblocked_reply(answers, backend.chat_id, held, left)
        if wait > 0 and (sent["reply"] is None or sent.get("unblocked", {}) is None):  # what holds the chat up
            waiting = await waiting_approvals(backend)
            if waiting:
                sent["approvals"] = waiting
                sent["note"] = approval_note(waiting)
        return sent

    @router.get("/events", dependencies=[Depends(session)])
    async def events(request: Request) -> StreamingResponse:
        # A reconnect names the last event it got; a first stream the cursor its history load returned.
        last_event_id = request.headers.get("last-event-id") or request.query_params.get("since")

        async def stream() -> AsyncIterator[str]:
            async with backend.hub.subscribe(last_event_id) as subscription:
                yield "retry: 2000\n\n"
                while True:
                    try:
                        async with asyncio.timeout(KEEPALIVE_SECONDS):
                            event = await subscription.next()
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if event is None:
                        return
                    yield event.encode()

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def ask(name: str, params: dict[str, Any]) -> Any:
        try:
            return await backend.query(name, params)
        except EngineUnavailable:
            raise HTTPException(503, "the engine is not running; start it (klaw engine) and try again") from None
        except QueryFailed as exc:
            raise HTTPException(400, str(exc)) from None

    @router.get("/history", dependencies=[Depends(session)])
    async def history() -> Any:
        """The page's own chat so far (newest 50 messages), replies rendered like live ones, and the
        event cursor read before asking: the page streams events after it, so a reply arriving while
        the history loads is not missed (one in both is shown once, by its id). `approvals`: the questions
        waiting for an answer, as asked, so a page (re)loaded meanwhile offers their buttons again."""
        cursor = backend.hub.last_id
        answer = await ask("history", {"channel": "web", "chat_id": backend.chat_id})
        answer["approvals"] = await waiting_approvals(backend)
        answer["event_cursor"] = cursor
        for message in answer["messages"]:
            if message["role"] == "assistant":
                message["html"] = render_markdown(message["text"])
                if message.get("tools"):
                    message["tools_line"] = tools_used(message["tools"])
            elif message.get("turn_failed"):  # the calls of a turn that failed after them, with its message
                message["tools_line"] = tools_before_failing(message["tools"])
        return answer

    @router.get("/approvals", dependencies=[Depends(session)])
    async def approvals() -> Any:
        """The approval questions still waiting in the page's chat. A reply ends its own turn's question
        only: the page asks which still wait before closing any, so an older reply shown late (it arrived
        while the page loaded) never closes a later question's buttons."""
        return {"approvals": await waiting_approvals(backend)}

    @router.get("/chats", dependencies=[Depends(session)])
    async def chats() -> Any:
        found = (await ask("chats", {}))["chats"]
        mine = {"channel": "web", "chat_id": backend.chat_id}
        return {"chats": [mine, *(chat for chat in found if chat != mine)]}

    @router.get("/turns", dependencies=[Depends(session)])
    async def turns(channel: str, chat_id: str) -> Any:
        return await ask("turns", {"channel": channel, "chat_id": chat_id})

    @router.get("/segments", dependencies=[Depends(session)])
    async def segments(channel: str, chat_id: str) -> Any:
        return await ask("segments", {"channel": channel, "chat_id": chat_id})

    @router.get("/segments/{segment_id}", dependencies=[Depends(session)])
    async def segment(segment_id: int) -> Any:
        return await ask("segment", {"segment_id": segment_id})

    @router.get("/search", dependencies=[Depends(session)])
    async def search(channel: str, chat_id: str, q: str, segment_id: int | None = None, limit: int = 10) -> Any:
        params = {"channel": channel, "chat_id": chat_id, "text": q, "segment_id": segment_id, "limit": limit}
        return await ask("search", params)

    @router.get("/settings", dependencies=[Depends(session)])
    async def settings() -> JSONResponse:
        """engine.yaml as the gateway loaded it, with what `/summarizer`, `/embeddings` and `/rag` changed
        (kept in the engine's database, so asked of the engine) in place of the file's value. `shown` is the
        value as `klaw config show` prints it (`commands` as its names, not a JSON dump); `value` the whole."""
        rows: list[dict[str, Any]] = [
            {"field": row.field, "value": row.value, "source": row.source, "shown": shown(row.field, row.value)}
            for row in backend.settings()
        ]
        note = None
        try:
            overrides = {o["field"]: o for o in (await backend.query("settings", {}))["overrides"]}
        except EngineUnavailable:
            overrides, note = {}, "The engine is not running: values set by /summarizer, /embeddings, /rag not shown."
        except QueryFailed:  # an engine older than this query
            overrides, note = {}, "This engine does not say which values commands changed; restart it after updating."
        for row in rows:
            field = str(row["field"])
            override = overrides.get(field)
            if override is not None:
                was = shown(field, row["value"])
                row["source"] = f"set by {override['command']} (overrides {row['source']}: {was})"
                row["value"] = override["value"]
                row["shown"] = shown(field, override["value"])
                row["command"] = override["command"]
        return JSONResponse({"settings": rows, "note": note})

    return router


async def waiting_approvals(backend: WebBackend) -> list[dict[str, Any]]:
    """The approval questions waiting in the page's chat (`id`, `tool`, `text`, and `html` as the live
    notice renders it: decision 314); none when the engine is down or too old to say (decision 359)."""
    try:
        found = await backend.query("approvals", {"channel": "web", "chat_id": backend.chat_id})
    except (EngineUnavailable, QueryFailed):
        return []
    return [{**question, "html": render_literal(str(question["text"]))} for question in found["approvals"]]


def approval_note(waiting: list[dict[str, Any]]) -> str:
    """What a script reads when its wait ended on approval questions: which tool, which id, what to send."""
    asked = " and ".join(f"{question['tool']} (request {question['id']})" for question in waiting)
    first = waiting[0]["id"]
    return (
        f"No reply yet: the agent is waiting for your approval to run {asked}. Answer with POST /api/messages"
        f' and {{"text": "/approve {first}"}} or {{"text": "/deny {first}"}}'
        + (" (each id in turn)" if len(waiting) > 1 else "")
        + "; the reply then follows in GET /api/events and GET /api/history."
    )


async def _answer_to(answers: Subscription, message_id: str, seconds: float) -> dict[str, Any] | None:
    """The reply, notice or error the engine sent for `message_id` (`kind` and `text`, and `html` for a
    reply), or None when none came within `seconds` (it will be in `/api/history`). A reply to several
    messages answered together is each one's (its `answers` lists them); before, only the last one's
    caller got it and the others waited out `seconds` for null. A question to approve a held tool ends
    the wait at once, None: the chat's reply waits for the person's answer, which a script waiting here
    could not give (decision 360)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while (event := await answers.next()) is not None:
                if event.data.get("approval"):
                    return None
                answered = event.data.get("reply_to") == message_id or message_id in event.data.get("answers", ())
                if event.kind in ANSWERS and answered:
                    return {"kind": event.kind, **{k: v for k, v in event.data.items() if k != "reply_to"}}
    return None
