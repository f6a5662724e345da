"""The web page's FastAPI application: login, the page itself, static files, and the API.

Plain HTML, CSS and JavaScript shipped in the package (`static/`), no build step. Headers keep the
page to itself: a strict Content-Security-Policy (scripts and styles only from this origin, no
inline code, no framing), no referrer to other sites, no caching of pages or API answers. Unsafe methods from
another origin are refused before any handler runs (the `Origin` header must name this host), on
top of SameSite=Strict cookies and CSRF tokens.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from importlib import resources
from urllib.parse import urlsplit

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from klaw.channels.web.api import WebBackend, build_api
from klaw.channels.web.auth import LOGIN_COOKIE, LOGIN_SECONDS, SESSION_COOKIE, SESSION_SECONDS, WebAuth

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _page(name: str) -> str:
    return (resources.files("klaw.channels.web") / "static" / name).read_text(encoding="utf-8")


def create_app(backend: WebBackend, auth: WebAuth) -> FastAPI:
    app = FastAPI(title="klaw", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(build_api(backend, auth))
    app.mount("/static", StaticFiles(packages=[("klaw.channels.web", "static")]), name="static")

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method not in SAFE_METHODS and not _same_origin(request):
            return JSONResponse({"detail": "cross-origin request refused"}, status_code=403)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"  # no-referrer would make Chrome send Origin: null
        if not request.url.path.startswith("/static/"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    @app.get("/")
    async def index(request: Request) -> Response:
        if not auth.valid_session(request.cookies.get(SESSION_COOKIE)):
            return RedirectResponse("/login", status_code=303)
        return HTMLResponse(_page("index.html"))

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
            return _login_form(auth, "The form expired; please try again.", status=403)
        if not isinstance(typed, str) or not auth.check_token(typed):
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
        if not auth.valid_session(cookie) or not isinstance(presented, str) or not auth.valid_csrf(cookie, presented):
            return JSONResponse({"detail": "missing or wrong CSRF token"}, status_code=403)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return app


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
