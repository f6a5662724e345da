"""Errors from calling a model, one class per thing a caller can do something about.

The engine turns these into a reply the user reads ("the model server is down", "the key in
OPENAI_API_KEY was rejected"), so every message says what happened, for which model id and base
URL, and what to do. No message ever contains the request's content (the conversation) or an API
key, nor a password in the base URL (masked here, for every subclass): errors end up in logs and chat
replies. Server error messages are included (truncated)
because they usually name the real problem, e.g. an unknown model name.
"""

from __future__ import annotations

from collections.abc import Sequence

from klaw.errors import KlawError
from klaw.redaction import mask_url_credentials
from klaw.text_preview import preview

_MAX_SERVER_MESSAGE = 300


class LlmError(KlawError, RuntimeError):
    """A model call failed. `model_id` and `base_url` say which endpoint; `status` the HTTP status."""

    def __init__(
        self,
        what: str,
        *,
        model_id: str,
        base_url: str | None,
        hint: str = "",
        status: int | None = None,
    ) -> None:
        where = f"model {model_id!r}" + (f" at {base_url}" if base_url else "")
        message = f"{what} ({where})."
        if hint:
            message += f" {hint}"
        super().__init__(mask_url_credentials(message))  # a password in baseUrl never reaches the chat
        self.model_id = model_id
        self.base_url = base_url
        self.status = status


class LlmTimeoutError(LlmError):
    """The server sent nothing for the configured timeout (not retried: see `klaw.llm.http`)."""


class LlmRateLimitError(LlmError):
    """HTTP 429 on every attempt. `retry_after` is the server's last requested wait, if it gave one
    (`klaw.llm.http` sets it on the error it raises)."""

    retry_after: float | None = None


class LlmServerError(LlmError):
    """HTTP 5xx (or an error event mid-stream) on every attempt: the server is broken or overloaded."""


class LlmConnectionError(LlmError):
    """The server could not be reached or dropped the connection, on every attempt."""


class LlmAuthError(LlmError):
    """HTTP 401/403, or the environment variable that should hold the API key is unset."""


class LlmBadRequestError(LlmError):
    """HTTP 400/404/422 and other client errors: the request was wrong (e.g. an unknown model name).

    Retrying the same request cannot succeed.
    """


class LlmMalformedResponseError(LlmError):
    """The server answered 200 with something that is not a valid OpenAI-format response."""


class UnknownModelError(LlmError, ValueError):
    """A model id that is not configured under `models:` in engine.yaml (`klaw.llm.catalogue`). A
    `ValueError` too: where a person or a model chose the id, it is bad input, answered as such."""

    def __init__(self, model_id: str, known: Sequence[str]) -> None:
        shown = preview(model_id)  # a 5,000-character name quoted whole filled 3 Telegram messages (decision 487)
        Exception.__init__(self, f"unknown model {shown!r}; configured models: {', '.join(known) or '(none)'}")
        self.model_id = model_id
        self.base_url = None
        self.status = None
        self.known = tuple(known)


def server_message(text: str) -> str:
    """A server-supplied error message, shortened so one verbose proxy page cannot flood a reply."""
    text = " ".join(text.split())
    if len(text) > _MAX_SERVER_MESSAGE:
        return text[: _MAX_SERVER_MESSAGE - 1] + "…"
    return text
