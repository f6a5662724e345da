"""One POST to an OpenAI-compatible endpoint, with retries and error mapping shared by chat and embeddings.

Retry rules, and why:

* HTTP 429 and 408/409/5xx and failures to connect are retried up to `max_retries` times with
  exponential backoff plus jitter (so several clients that failed together do not retry together).
  A `Retry-After` (or OpenAI's `retry-after-ms`) header is honoured, capped at
  `RetryPolicy.max_retry_after` so a provider asking for an hour cannot stall a chat turn.
* A timeout — no byte from the server for `timeout_seconds` — is NOT retried but raised as
  `LlmTimeoutError`: the usual cause is a model too slow for the hardware or a hung server, and a
  chat user would rather hear that after one 2-minute wait than after four.
* Connecting gets at most `connect_timeout_seconds` (10 s; a model's `connectTimeoutSeconds`), whatever
  `timeout_seconds` is: a server
  whose packets are dropped (down, firewalled, a wrong address on the network) is found out in
  seconds, and its retries add up to well under a minute instead of `timeout_seconds` each (4 x 120 s).
  A reachable server connects in milliseconds, even across the internet.
* Everything else (401/403, other 4xx, a 200 that is not JSON) fails at once: retrying the same
  request cannot change the answer.

A server's own error message goes into the error (it usually names the real problem, e.g. an unknown
model), unless it quotes what the request carried: some servers echo the input they could not handle,
and errors end up in logs, chat replies and the embedding queue's `last_error`.

The sleep between attempts is injected so tests never really wait. Logs carry the model id, status,
attempt and duration — never the request body (the conversation) or the API key.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from klaw.llm.answer_cap import IDENTITY, TOO_LONG_HINT, capped, excerpt, parsed
from klaw.llm.asyncio_transport import AsyncioTransport, tls_context
from klaw.llm.errors import (
    LlmAuthError,
    LlmBadRequestError,
    LlmConnectionError,
    LlmError,
    LlmMalformedResponseError,
    LlmRateLimitError,
    LlmServerError,
    LlmTimeoutError,
)
from klaw.llm.proxy import proxy_for
from klaw.llm.server_said import error_message
from klaw.llm.unreachable import broken_off, url_problem, what_happened
from klaw.redaction import mask_url_credentials

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
_RETRYABLE_STATUSES = frozenset({408, 409, 429})


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What is being called, for the request itself and for error messages.

    `section` is where the settings live in engine.yaml (e.g. `models.ollama/llama3.2` or
    `embedder`), so a message can say exactly what to change.
    """

    model_id: str
    base_url: str
    api_key_env: str | None
    timeout_seconds: float
    max_retries: int
    section: str
    connect_timeout_seconds: float = 10.0  # at most timeout_seconds (module docstring)
    # The whole call, retries and body included (a model's totalTimeoutSeconds, decision 298); None: no limit.
    total_timeout_seconds: float | None = None

    def url(self, path: str) -> str:
        """`path` under the base URL, before its query string (`…/v1?api-version=1` asks
        `…/v1/chat/completions?api-version=1`, as Azure's endpoints expect)."""
        base, question, query = self.base_url.partition("?")
        return f"{base.rstrip('/')}/{path.lstrip('/')}" + (f"?{query}" if question else "")

    def error(self, cls: type[LlmError], what: str, hint: str = "", status: int | None = None) -> LlmError:
        return cls(what, model_id=self.model_id, base_url=self.base_url, hint=hint, status=status)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff shape: attempt n waits about `base_delay * 2**(n-1)` seconds, at most `max_delay`."""

    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 30.0

    def backoff(self, attempt: int, rand: Callable[[], float]) -> float:
        """'Equal jitter': half the exponential delay fixed, half random."""
        delay = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return delay / 2 + rand() * delay / 2


def new_http_client(base_url: str) -> httpx.AsyncClient:
    """An HTTP client for one base URL (timeouts per request: models sharing a server differ). Through the
    proxy the environment names for it (`llm/proxy.py`, decision 318) on httpx's transports, else on
    asyncio's streams (decision 220; a given transport turns env proxies off). Cookies: `CookiesWhenSet`."""
    proxy = proxy_for(base_url)
    if proxy is not None:
        client = httpx.AsyncClient(
            timeout=None, follow_redirects=False, verify=tls_context(), proxy=proxy.url, trust_env=False
        )
    else:
        client = httpx.AsyncClient(timeout=None, follow_redirects=False, transport=AsyncioTransport())
    # httpx offers no parameter for the jar's class (its `cookies` setter copies into a plain `Cookies`);
    # tests/llm/test_http_client_cookies.py fails if a newer httpx stops reading `_cookies`.
    client._cookies = CookiesWhenSet()
    return client


class CookiesWhenSet(httpx.Cookies):
    """httpx's cookies, reading an answer's only when it sets some. httpx hands every answer to
    `http.cookiejar`, which wraps the request and the answer in urllib's classes (parsing the URL
    again) before finding no `Set-Cookie` header: ~15 % of a model request's CPU (decision 288). The
    jar reads `Set-Cookie` and `Set-Cookie2` alone, so skipping an answer without either changes nothing."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


@functools.lru_cache(maxsize=64)
def parsed_url(url: str) -> httpx.URL:
    """`url` parsed once: httpx parses a string URL on every request (~11 % of a model request's CPU,
    decision 288) and takes an `httpx.URL` as it is. An invalid URL raises each time (nothing cached)."""
    return httpx.URL(url)


def auth_headers(endpoint: Endpoint, env: Mapping[str, str]) -> dict[str, str]:
    """The Authorization header, or none when no key is configured (Ollama, llama.cpp need none).

    A configured but unset variable fails here, before any request, rather than as a 401 later.
    """
    if endpoint.api_key_env is None:
        return {}
    key = env.get(endpoint.api_key_env, "")
    if not key:
        raise endpoint.error(
            LlmAuthError,
            f"the environment variable {endpoint.api_key_env}, which should hold the API key, is not set",
            f"Set it in the engine's environment, or remove apiKeyEnv under {endpoint.section} "
            "if this server needs no key.",
        )
    if any(mark in key for mark in "\r\n\0"):
        # Sent, it would end the header early (or inject another); h11 refuses it with its value in the
        # message ("Illegal header value b'Bearer sk-…'"), which reaches logs and the chat: refused here.
        raise endpoint.error(
            LlmAuthError,
            f"the environment variable {endpoint.api_key_env}, which should hold the API key, holds a line break",
            "Set it to the key alone, on one line (a key copied from a file often ends with its newline).",
        )
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def open_with_retries(
    http: httpx.AsyncClient,
    endpoint: Endpoint,
    path: str,
    payload: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    sleep: Sleep,
    policy: RetryPolicy = RetryPolicy(),
    rand: Callable[[], float] = random.random,
) -> AsyncIterator[httpx.Response]:
    """POST `payload` and yield the successful (2xx) response with its body not yet read.

    The body is left to the caller so streaming can read it chunk by chunk; read it inside
    `reading_errors(endpoint)` so transport failures become `LlmError`s too.
    """
    headers = IDENTITY | auth_headers(endpoint, env)  # uncompressed, so its bytes can be counted (decision 317)
    attempts = endpoint.max_retries + 1
    timeout = httpx.Timeout(
        endpoint.timeout_seconds, connect=min(endpoint.timeout_seconds, endpoint.connect_timeout_seconds)
    )
    for attempt in range(1, attempts + 1):
        started = time.monotonic()
        delay: float | None = None
        failure: LlmError
        status: int | str
        try:
            url = parsed_url(endpoint.url(path))
            request = http.build_request("POST", url, json=payload, headers=headers, timeout=timeout)
            response = await http.send(request, stream=True)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise endpoint.error(
                LlmBadRequestError,
                f"baseUrl is not a valid http(s) URL ({url_problem(exc)})",
                f"Fix baseUrl under {endpoint.section}, e.g. http://localhost:11434/v1.",
            ) from exc
        except httpx.TimeoutException as exc:
            if not isinstance(exc, httpx.ConnectTimeout):
                raise _timeout(endpoint) from exc
            failure, status = _unreachable(endpoint, exc, attempt), type(exc).__name__
        except httpx.TransportError as exc:  # refused, reset, DNS failure, dropped keep-alive connection
            failure, status = _unreachable(endpoint, exc, attempt), type(exc).__name__
        else:
            if response.is_success:
                logger.debug(
                    "llm call model=%s status=%d attempt=%d headers_ms=%.0f",
                    endpoint.model_id,
                    response.status_code,
                    attempt,
                    (time.monotonic() - started) * 1000,
                )
                try:
                    capped(response, functools.partial(unreadable, endpoint))  # at most MAX_BODY_BYTES read
                    yield response
                finally:
                    await response.aclose()
                return
            with reading_errors(endpoint):
                body = await excerpt(response)  # only a short excerpt is ever shown
            await response.aclose()
            status = response.status_code
            failure, delay = _classify(endpoint, response, error_message(body, payload), attempt, policy)
        logger.warning(
            "llm call failed model=%s status=%s attempt=%d/%d after_ms=%.0f",
            endpoint.model_id,
            status,
            attempt,
            attempts,
            (time.monotonic() - started) * 1000,
        )
        if attempt == attempts:
            raise failure
        await sleep(policy.backoff(attempt, rand) if delay is None else delay)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


@dataclass(frozen=True)
class RetryingPoster:
    """One endpoint's HTTP client, key lookup and retry settings, bundled so each call site names
    only the path and the payload (the chat client and the embedder share this)."""

    http: httpx.AsyncClient
    endpoint: Endpoint
    env: Mapping[str, str]
    sleep: Sleep
    policy: RetryPolicy = RetryPolicy()
    rand: Callable[[], float] = random.random

    async def post_json(self, path: str, payload: Mapping[str, Any]) -> Any:
        """POST `payload`, retrying as described in the module docstring, and return the parsed JSON."""
        async with self.open(path, payload) as response:
            with reading_errors(self.endpoint):
                body = await response.aread()
        return parsed(body, functools.partial(malformed, self.endpoint), "the response")

    def open(self, path: str, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[httpx.Response]:
        return open_with_retries(
            self.http, self.endpoint, path, payload, env=self.env, sleep=self.sleep, policy=self.policy, rand=self.rand
        )


@contextmanager
def reading_errors(endpoint: Endpoint) -> Iterator[None]:
    """Map transport failures while reading a response body (after the status line) to `LlmError`."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise _timeout(endpoint) from exc
    except httpx.TransportError as exc:
        raise endpoint.error(
            LlmConnectionError,
            f"the answer broke off: {broken_off(exc)}",
            "Check the server's logs: it may have crashed or run out of memory (or a proxy in between cut the"
            " answer short).",
        ) from exc


def malformed(endpoint: Endpoint, what: str) -> LlmError:
    """The refusal of an answer that is not an OpenAI-format one (or is too long to read)."""
    return endpoint.error(
        LlmMalformedResponseError,
        what,
        "Check that baseUrl points at an OpenAI-compatible API (it usually ends in /v1).",
    )


def unreadable(endpoint: Endpoint, what: str) -> LlmError:
    """The refusal of an answer klaw will not read on (answer_cap.py, decision 317)."""
    return endpoint.error(LlmMalformedResponseError, what, TOO_LONG_HINT)


def chat_path_in_base_url(base_url: str) -> str | None:
    """The fix when `base_url` ends with `/chat/completions`, else None. Every call appends that path
    itself, so such a base posts to `…/chat/completions/chat/completions` and is answered 404; copied
    from a provider's page, it is a common first mistake. The start-up check and a failed turn say the same."""
    base = base_url.rstrip("/")
    if not base.endswith("/chat/completions"):
        return None
    before = base.removesuffix("/chat/completions")
    return f"drop /chat/completions: baseUrl is the part before it ({mask_url_credentials(before)})"


def _unreachable(endpoint: Endpoint, exc: httpx.HTTPError, attempt: int) -> LlmError:
    proxy = proxy_for(endpoint.base_url)
    hint = "Check that the server is running and that baseUrl is right." if proxy is None else proxy.hint()
    return endpoint.error(
        LlmConnectionError,
        f"could not reach the server after {attempt} attempt(s): "
        f"{what_happened(exc, seconds=min(endpoint.timeout_seconds, endpoint.connect_timeout_seconds))}",
        hint,
    )


def _timeout(endpoint: Endpoint) -> LlmError:
    return endpoint.error(
        LlmTimeoutError,
        f"the server sent nothing for {endpoint.timeout_seconds:g} s",
        f"The model may be too slow for this machine or the server hung; raise timeoutSeconds under "
        f"{endpoint.section} or use a smaller model.",
    )


def _classify(
    endpoint: Endpoint, response: httpx.Response, said: str, attempt: int, policy: RetryPolicy
) -> tuple[LlmError, float | None]:
    """The error a non-2xx response means, and how long to wait if it is worth retrying (else raise).
    `said` is the server's message as `_error_message` gives it."""
    status = response.status_code
    detail = f"HTTP {status}" + (f": {said}" if said else "")
    if status == 429 or (status == 503 and _retry_after(response) is not None):
        retry_after = _retry_after(response)
        delay = None if retry_after is None else min(retry_after, policy.max_retry_after)
        cls = LlmRateLimitError if status == 429 else LlmServerError
        what = "the server is rate-limiting requests" if status == 429 else "the server is unavailable"
        error = cls(
            f"{what} ({detail}), still after {attempt} attempt(s)",
            model_id=endpoint.model_id,
            base_url=endpoint.base_url,
            status=status,
            hint="Wait a little before trying again, or lower processing.maxConcurrentLlm.",
        )
        if isinstance(error, LlmRateLimitError):
            error.retry_after = retry_after
        return error, delay
    if status >= 500 or status in _RETRYABLE_STATUSES:
        return endpoint.error(
            LlmServerError,
            f"the server failed ({detail}) on all {attempt} attempt(s)",
            "Check the server's logs, or try again later.",
            status,
        ), None
    if status in (401, 403):
        raise endpoint.error(LlmAuthError, f"the server refused the request ({detail})", _auth_hint(endpoint), status)
    if status == 407 and (proxy := proxy_for(endpoint.base_url)) is not None:
        hint = proxy.hint()
    elif (fix := chat_path_in_base_url(endpoint.base_url)) is not None:
        hint = f"Check baseUrl under {endpoint.section}: {fix}."
    else:
        hint = (
            f"Check the model name and baseUrl under {endpoint.section} (most servers need the /v1 suffix), "
            "and that this server supports the request (tool calling, context length)."
        )
    raise endpoint.error(LlmBadRequestError, f"the server rejected the request ({detail})", hint, status)


def _auth_hint(endpoint: Endpoint) -> str:
    if endpoint.api_key_env is None:
        return (
            f"No API key is configured: set apiKeyEnv under {endpoint.section} to the name of the "
            "environment variable that holds the key."
        )
    return f"Check that the environment variable {endpoint.api_key_env} holds a valid key with access to this model."


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, `Retry-After` seconds or HTTP date."""
    millis = response.headers.get("retry-after-ms")
    seconds = response.headers.get("retry-after")
    try:
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        if seconds is not None:
            return max(0.0, float(seconds))
    except ValueError:
        pass
    if seconds:
        try:
            return max(0.0, parsedate_to_datetime(seconds).timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None
