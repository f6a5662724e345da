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
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from klaw.llm.answer_cap import IDENTITY, capped, excerpt, parsed
from klaw.llm.call_errors import classify, malformed, out_of_reach, reading_errors, timed_out, unreadable
from klaw.llm.endpoint import Endpoint, RetryPolicy, Sleep, auth_headers
from klaw.llm.errors import LlmBadRequestError, LlmError
from klaw.llm.http_client import parsed_url
from klaw.llm.post_request import post_request, timeout_of
from klaw.llm.server_said import error_message
from klaw.llm.unreachable import url_problem
from klaw.llm.wrong_scheme import wrong_scheme

logger = logging.getLogger(__name__)
DEFAULT_POLICY = RetryPolicy()  # frozen: one shared default


@asynccontextmanager
async def open_with_retries(
    http: httpx.AsyncClient,
    endpoint: Endpoint,
    path: str,
    payload: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    sleep: Sleep,
    policy: RetryPolicy = DEFAULT_POLICY,
    rand: Callable[[], float] = random.random,
    encoded: bytes | None = None,
) -> AsyncIterator[httpx.Response]:
    """POST `payload` and yield the successful (2xx) response with its body not yet read. `encoded`: the
    payload's JSON as the caller encoded it (`wire_body.py`), sent as it is; None: httpx encodes it.

    The body is left to the caller so streaming can read it chunk by chunk; read it inside
    `reading_errors(endpoint)` so transport failures become `LlmError`s too.
    """
    headers = IDENTITY | auth_headers(endpoint, env)  # uncompressed, so its bytes can be counted (decision 317)
    attempts = endpoint.max_retries + 1
    timeout = timeout_of(endpoint)
    for attempt in range(1, attempts + 1):
        started = time.monotonic()
        delay: float | None = None
        failure: LlmError
        status: int | str
        try:
            url = parsed_url(endpoint.url(path))
            request = post_request(http, url, headers, timeout, payload, encoded)
            response = await http.send(request, stream=True)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise endpoint.error(
                LlmBadRequestError,
                f"baseUrl is not a valid http(s) URL ({url_problem(exc)})",
                f"Fix baseUrl under {endpoint.section}, e.g. http://localhost:11434/v1.",
            ) from exc
        except httpx.TimeoutException as exc:
            if not isinstance(exc, httpx.ConnectTimeout):
                raise timed_out(endpoint) from exc
            failure, status = out_of_reach(endpoint, exc, attempt), type(exc).__name__
        except httpx.TransportError as exc:  # refused, reset, DNS failure, dropped keep-alive connection
            # The last attempt's failure asks the port whether it speaks the other scheme (wrong_scheme.py).
            scheme = await wrong_scheme(endpoint.base_url, exc) if attempt == attempts else None
            failure, status = out_of_reach(endpoint, exc, attempt, scheme), type(exc).__name__
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
            failure, delay = classify(endpoint, response, error_message(body, payload), attempt, policy, body)
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
    policy: RetryPolicy = DEFAULT_POLICY
    rand: Callable[[], float] = random.random

    async def post_json(self, path: str, payload: Mapping[str, Any], body: bytes | None = None) -> Any:
        """POST `payload` (as `body`, its JSON encoded by the caller, when given), retrying as described in
        the module docstring, and return the parsed JSON."""
        async with self.open(path, payload, body) as response:
            with reading_errors(self.endpoint):
                answer = await response.aread()
        return parsed(answer, functools.partial(malformed, self.endpoint), "the response")

    def open(
        self, path: str, payload: Mapping[str, Any], body: bytes | None = None
    ) -> AbstractAsyncContextManager[httpx.Response]:
        return open_with_retries(
            self.http,
            self.endpoint,
            path,
            payload,
            env=self.env,
            sleep=self.sleep,
            policy=self.policy,
            rand=self.rand,
            encoded=body,
        )
