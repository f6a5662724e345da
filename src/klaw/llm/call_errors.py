"""What a failed model or embedding call means, in words: an error status (`classify`: retried or not, after
how long), a server out of reach or silent (`out_of_reach`, `timed_out`), an answer broken off while read
(`reading_errors`), or one klaw will not read (`malformed`, `unreadable`). Each names what to change
(`Endpoint.section`) and, for a request through a proxy, the proxy rather than the server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import parsedate_to_datetime

import httpx

from klaw.llm.answer_cap import TOO_LONG_HINT
from klaw.llm.endpoint import Endpoint, RetryPolicy, chat_path_in_base_url
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
from klaw.llm.unreachable import broken_off, what_happened
from klaw.llm.wrong_scheme import TLS_WORDS, tls_port_answer, with_scheme

_RETRYABLE_STATUSES = frozenset({408, 409, 429})


@contextmanager
def reading_errors(endpoint: Endpoint) -> Iterator[None]:
    """Map transport failures while reading a response body (after the status line) to `LlmError`."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise timed_out(endpoint) from exc
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


def out_of_reach(endpoint: Endpoint, exc: httpx.HTTPError, attempt: int, scheme: str | None = None) -> LlmError:
    """`scheme`: `wrong_scheme`'s words when the port speaks the other scheme, said first, with the URL to set."""
    why = what_happened(exc, seconds=min(endpoint.timeout_seconds, endpoint.connect_timeout_seconds))
    if scheme is not None:
        return endpoint.error(
            LlmConnectionError,
            f"could not reach the server after {attempt} attempt(s): {scheme} ({why})",
            _other_scheme(endpoint),
        )
    proxy = proxy_for(endpoint.base_url)
    hint = "Check that the server is running and that baseUrl is right." if proxy is None else proxy.hint()
    return endpoint.error(LlmConnectionError, f"could not reach the server after {attempt} attempt(s): {why}", hint)


def _other_scheme(endpoint: Endpoint) -> str:
    scheme = "https" if endpoint.base_url.lower().startswith("http://") else "http"
    return f"Set baseUrl under {endpoint.section}: {with_scheme(endpoint.base_url, scheme)}"


def timed_out(endpoint: Endpoint) -> LlmError:
    return endpoint.error(
        LlmTimeoutError,
        f"the server sent nothing for {endpoint.timeout_seconds:g} s",
        f"The model may be too slow for this machine or the server hung; raise timeoutSeconds under "
        f"{endpoint.section} or use a smaller model.",
    )


def classify(
    endpoint: Endpoint, response: httpx.Response, said: str, attempt: int, policy: RetryPolicy, body: bytes = b""
) -> tuple[LlmError, float | None]:
    """The error a non-2xx response means, and how long to wait if it is worth retrying (else raise).
    `said` is the server's message as `_error_message` gives it; `body` the start of the answer's body (a
    TLS port's HTTP 400 to plain HTTP is known by its words: nginx's, Go's)."""
    status = response.status_code
    if tls_port_answer(status, body):
        raise endpoint.error(
            LlmBadRequestError, f"the server rejected the request (HTTP 400): {TLS_WORDS}", _other_scheme(endpoint), 400
        )
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
