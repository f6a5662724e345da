"""The web page's FastAPI application: login, the page itself, static files, and the API.

Plain HTML, CSS and JavaScript shipped in the package (`static/`), no build step. Headers keep the
page to itself: a strict Content-Security-Policy (scripts and styles only from this origin, no
inline code, no framing), no referrer to other sites, no caching of pages or API answers, and the page's
own files (`/static/…`) revalidated at every load (`Cache-Control: no-cache`, answered 304 by their ETag while
unchanged): a reload after an upgrade runs the new app.js with the new index.html, never the browser's cached
old one (decision 512). A request naming
another host than the page's own is refused before anything else (host_guard.py). Unsafe methods from
another origin are refused before any handler runs (the `Origin` header must name this host), on
top of SameSite=Strict cookies and CSRF tokens. Before any body is read, the sender must hold a
session (or, for the login form, its pre-session cookie) and the body must fit the cap (body_guard.py);
wrong tokens are rate-limited per client (login_limit.py), the right one never is. A script sends
the token as a bearer key on `/api/…` instead of signing in (decision 247): a
wrong one is refused before anything else runs.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable, Iterable
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from klaw.channels.web.api import WebBackend, build_api
from klaw.channels.web.auth import LOGIN_COOKIE, LOGIN_SECONDS, SESSION_COOKIE, SESSION_SECONDS, WebAuth
from klaw.channels.web.body_guard import BODY_KEY, BodyGuard
from klaw.channels.web.host_guard import HostGuard
from klaw.channels.web.login_limit import LoginLimiter
from klaw.embedded_http import mark_owner
from klaw.message_text import LONE_SURROGATE
from klaw.strict_json import int_digits_limit, too_long_number

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
EXPIRED_FORM = "The form expired; please try again."


# The page's files, shipped in the package (a test points this at a copy it can change).
STATIC_DIRECTORY = Path(str(resources.files("klaw.channels.web") / "static"))
# The page's own files: the browser may keep them but asks again at every load (If-None-Match: a 304 while
# unchanged). Without it Chromium took last-modified as leave to reuse them for days, so a reload after an
# upgrade ran the old app.js with the new index.html ("openEvents is not defined"; newcomer22, decision 512).
STATIC_CACHE = "no-cache"


def _page(name: str) -> str:
    return (STATIC_DIRECTORY / name).read_text(encoding="utf-8")


def create_app(backend: WebBackend, auth: WebAuth, allowed_hosts: Iterable[str] = ()) -> FastAPI:
    """`allowed_hosts`: names the page answers to besides localhost and IP addresses (host_guard.py)."""
    app = FastAPI(title="klaw", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(build_api(backend, auth))
    app.mount("/static", StaticFiles(directory=STATIC_DIRECTORY), name="static")
    limiter = LoginLimiter(auth.clock)

    def admit(request: Request) -> Response | None:
        """Who may send a body at all, from headers and cookies alone (the body is not read yet)."""
        path = request.url.path
        if path == "/login":  # the wrong-token limit is checked after the token (see `login`)
            if not auth.valid_login_nonce(request.cookies.get(LOGIN_COOKIE)):
                return _login_form(auth, EXPIRED_FORM, status=403)
            return None
        if auth.valid_session(request.cookies.get(SESSION_COOKIE)):
            return None
        if path.startswith("/api/") and auth.valid_bearer(request.headers.get("authorization")):
            return None
        if path == "/logout":  # a tab left open past its session: it is signed out already
            return RedirectResponse("/login", status_code=303)
        return JSONResponse({"detail": "sign in first"}, status_code=401)

    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _unparsable_body)  # type: ignore[arg-type]

    # Added before `guard`, so it runs inside it: its refusals get the same security headers.
    app.add_middleware(BodyGuard, admit=admit)

    def wrong_bearer(request: Request) -> Response | None:
        """A script's bearer key on `/api/…`, refused at once when wrong (counted like a wrong sign-in).

        The key is compared first (in constant time) and only a wrong one meets the limit: every local
        user shares 127.0.0.1, so refusing the right key after others' wrong ones let anyone on the
        machine lock its owner out."""
        scheme = request.headers.get("authorization", "").partition(" ")[0]
        if scheme.lower() != "bearer" or not request.url.path.startswith("/api/"):
            return None  # none, or another scheme (a proxy's Basic sign-in in front of the page): not ours
        if auth.valid_bearer(request.headers["authorization"]):
            return None
        wait = limiter.retry_after(_client(request))
        if wait is not None:
            message = f"too many wrong tokens from this address; try again in {wait} seconds"
            return JSONResponse({"detail": message}, status_code=429, headers={"Retry-After": str(wait)})
        limiter.failed(_client(request))
        detail = "wrong bearer token: send Authorization: Bearer <the token in KLAW_HOME/web_token>"
        return JSONResponse({"detail": detail}, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method not in SAFE_METHODS and not _same_origin(request):
            return JSONResponse({"detail": "cross-origin request refused"}, status_code=403)
        refused = wrong_bearer(request)  # before any body is read: this runs outside BodyGuard
        if refused is not None:
            return refused
        if auth.valid_session(request.cookies.get(SESSION_COOKIE)) or auth.valid_bearer(
            request.headers.get("authorization")
        ):
            mark_owner(request.scope)  # its connection is kept when a flood fills the cap (decision 367)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"  # no-referrer would make Chrome send Origin: null
        if request.url.path.startswith("/static/"):
            response.headers["Cache-Control"] = STATIC_CACHE
        else:
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    # Added last, so it runs first: a request naming another host (DNS rebinding) meets nothing else.
    app.add_middleware(HostGuard, allowed_hosts=allowed_hosts)

    @app.get("/")
    async def index(request: Request) -> Response:
        if not auth.valid_session(request.cookies.get(SESSION_COOKIE)):
            return RedirectResponse("/login", status_code=303)
        return HTMLResponse(_page("index.html"))

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        """Browsers ask for /favicon.ico on their own (a bookmark, a tab without the page's `<link>`)."""
        return RedirectResponse("/static/favicon.svg", status_code=308)

    @app.get("/login")
    async def login_page(request: Request) -> Response:
        if auth.valid_session(request.cookies.get(SESSION_COOKIE)):
            return RedirectResponse("/", status_code=303)
        return _login_form(auth)

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        typed, presented = form.get("token"), form.get("csrf")
        nonce = request.cookies.get(LOGIN_COOKIE)
        if not auth.valid_login_nonce(nonce) or not isinstance(presented, str) or not auth.valid_csrf(nonce, presented):
            return _login_form(auth, EXPIRED_FORM, status=403)
        if not isinstance(typed, str) or not auth.check_token(typed):
            # Only a wrong token meets the limit: the right one always signs in (see `wrong_bearer`).
            wait = limiter.retry_after(_client(request))
            if wait is not None:
                return _too_many_tries(auth, wait)
            limiter.failed(_client(request))
            return _login_form(auth, "That token is not right. It is in KLAW_HOME/web_token.", status=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE, auth.new_session(), max_age=SESSION_SECONDS, httponly=True, samesite="strict", path="/"
        )
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        return response

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        form = await request.form()
        cookie = request.cookies.get(SESSION_COOKIE)
        presented = form.get("csrf")
        if cookie is None or not isinstance(presented, str) or not auth.valid_csrf(cookie, presented):
            return JSONResponse({"detail": "missing or wrong CSRF token"}, status_code=403)
        auth.revoke_session(cookie)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return app


# The one JSON body the API takes (POST /api/messages), as a refusal shows it.
SHAPE = '{"text": "…"}'


async def _unparsable_body(request: Request, exc: StarletteHTTPException) -> Response:
    """FastAPI's bare "There was an error parsing the body" (400) said what failed, never why: the
    two causes a client can hit are named with what to send instead; every other HTTP error is
    answered as FastAPI would."""
    if exc.status_code == 400:
        cause = exc.__cause__
        if isinstance(cause, UnicodeDecodeError):
            why = f"the body is not UTF-8 text (invalid byte at position {cause.start}); send {SHAPE} encoded as UTF-8"
            return JSONResponse({"detail": why}, status_code=400)
        if isinstance(cause, RecursionError):
            why = f"the body's JSON is nested too deeply to read; send {SHAPE}"
            return JSONResponse({"detail": why}, status_code=400)
        found = too_long_number(request.scope.get(BODY_KEY, b"")) if isinstance(cause, ValueError) else None
        if found is not None:  # json.loads' bare ValueError: the field is found by reading the body again
            field, count = found
            why = (
                f"{field or 'the body'}: a number of {count:,} digits, more than the {int_digits_limit():,}"
                f" a number may have; send {SHAPE}"
            )
            return JSONResponse({"detail": why}, status_code=422)  # as a body that is not JSON (decision 431)
    return await http_exception_handler(request, exc)


async def _invalid_request(request: Request, exc: RequestValidationError) -> Response:
    """422 naming each bad field and what is wrong with it, never quoting what was sent.

    FastAPI's own answer echoes the input: that put message text into the response, and text that is
    not Unicode (a lone surrogate such as `\ud800`, valid in JSON) made the echo fail with a 500 whose
    traceback, input included, went to the log.
    """
    problems = []
    for error in exc.errors():
        location = tuple(error.get("loc", ()))
        kind = error.get("type")
        if kind == "json_invalid":  # said where, in json's own words ("Expecting value"), never the text
            why = str((error.get("ctx") or {}).get("error", "")).strip()
            at = f" at character {location[1]}" if len(location) > 1 and isinstance(location[1], int) else ""
            problems.append(f"the body is not valid JSON ({why or 'cannot be parsed'}{at}); send {SHAPE}")
            continue
        where = ".".join(str(part) for part in location[1:]) or "body"
        if where == "client_id":  # pydantic's words quoted the pattern (decision 486)
            problems.append(
                "client_id: the page's own id for the message must be 8 to 64 letters, digits, '-' or '_'"
                " (a UUID's hex, say); send it so, or leave it out; nothing was sent"
            )
        elif kind == "extra_forbidden":  # never dropped silently: the message would go where it was not meant
            problems.append(
                f"{where}: not a field of this API, which takes text (and client_id) and answers in web:main, the"
                " owner's web chat, only; leave it out; nothing was sent"
            )
        elif kind == "string_unicode":
            problems.append(f"{where}: {LONE_SURROGATE}")
        elif where == "wait" and location[:1] == ("query",):  # `nan` was "should be less than or equal to 600" (503)
            problems.append("wait: the seconds to wait for the reply, a number from 0 to 600 (0: do not wait)")
        elif where == "body" and not _says_json(request):  # FastAPI reads a body as JSON only when told
            kind = request.headers.get("content-type")
            sent = f"as {kind}" if kind else "with no Content-Type"
            problems.append(f"the body was sent {sent}, not as JSON: send {SHAPE} with Content-Type: application/json")
        elif where == "body":  # valid JSON, but not an object ("hello", [1, 2])
            problems.append(f"the body must be a JSON object: send {SHAPE}")
        else:
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return JSONResponse({"detail": "; ".join(problems)}, status_code=422)


def _says_json(request: Request) -> bool:
    """The Content-Type FastAPI parses as JSON: application/json or application/…+json (a body with
    none, or text/plain, reaches validation as bytes and would be called "not a JSON object")."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _too_many_tries(auth: WebAuth, wait: int) -> Response:
    message = f"Too many wrong tokens from this address; try again in {wait} seconds."
    response = _login_form(auth, message, status=429)
    response.headers["Retry-After"] = str(wait)
    return response


def _login_form(auth: WebAuth, error: str = "", status: int = 200) -> Response:
    nonce = auth.new_login_nonce()
    page = (
        _page("login.html")
        .replace("{{csrf}}", html.escape(auth.csrf_for(nonce), quote=True))
        .replace("{{error}}", html.escape(error))
    )
    response = HTMLResponse(page, status_code=status)
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=LOGIN_SECONDS, httponly=True, samesite="strict", path="/login")
    return response


def _same_origin(request: Request) -> bool:
    """No `Origin` (same-origin navigation in some browsers, curl) or one naming this very host."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")
