"""What a model or embedding call is addressed to (`Endpoint`), how its retries are spaced (`RetryPolicy`),
and the request's key header: what `llm/http.py` sends, the start-up check (`preflight`) checks, and every
error message names (the settings' section, the model, the base URL). `key_problem` sits here, not in
`preflight`, so `klaw config check` asks it without loading httpx (decision 437).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from klaw.llm.errors import LlmAuthError, LlmError
from klaw.redaction import mask_url_credentials

if TYPE_CHECKING:
    from klaw.config import ModelConfig

Sleep = Callable[[float], Awaitable[None]]


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


def chat_path_in_base_url(base_url: str) -> str | None:
    """The fix when `base_url` ends with `/chat/completions`, else None. Every call appends that path
    itself, so such a base posts to `…/chat/completions/chat/completions` and is answered 404; copied
    from a provider's page, it is a common first mistake. The start-up check and a failed turn say the same."""
    base = base_url.rstrip("/")
    if not base.endswith("/chat/completions"):
        return None
    before = base.removesuffix("/chat/completions")
    return f"drop /chat/completions: baseUrl is the part before it ({mask_url_credentials(before)})"


def key_problem(model: ModelConfig, model_id: str, env: Mapping[str, str] | None = None) -> str | None:
    """None when the model's API key is at hand (or none is configured), else the sentence every model
    call would fail with: the `apiKeyEnv` variable is not set. `klaw config check` asks this too, so it
    does not call valid what `klaw chat` then refuses."""
    try:
        auth_headers(model_endpoint(model, model_id), os.environ if env is None else env)
    except LlmError as exc:
        return str(exc)
    return None


def model_endpoint(model: ModelConfig, model_id: str) -> Endpoint:
    """The endpoint of a configured model for a start-up check: short timeout, no retries."""
    return Endpoint(
        model_id=model_id,
        base_url=model.base_url,
        api_key_env=model.api_key_env,
        timeout_seconds=5.0,
        max_retries=0,
        section=f"models.{model_id}",
    )
